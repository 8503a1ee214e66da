"""``serve --workers 2`` with a ``user_oauth`` backend: the admin API of the stored upstream
tokens (``POST /admin/upstream-tokens/list`` and ``.../purge``, ``mcp-gateway upstream-tokens``)
is served by the group's ops listener as by a single gateway's (issue 45).

With Redis the records are seeded in the real redis-server with the gateway's own codec (sealed
under the key the group reads), then listed and purged through the group's ops listener and the
command; with the memory backend every worker is asked (each audits its own purge), and a worker
that does not answer (stopped with SIGSTOP) makes the answer 503. And the login surface's
budget per client address (``login.pre_auth_rate``) is the group's, through Redis, not each
worker's."""

from __future__ import annotations

import base64
import json
import os
import signal
import time
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest

from gateway.config import RedisConfig, SealKey, Secret
from gateway.state.browser_records import owner_digest
from gateway.state.store import RedisStore
from gateway.state.upstream_tokens import RecordSeal, UpstreamRecord
from gateway.state.upstream_tokens_redis import RedisUpstreamTokens
from tests.integration.workers.test_workers import (
    group,
    log_lines,
    sample,
    worker_metrics,
    worker_pids,
)
from tests.support.redis_server import RedisServer, redis_server
from tests.support.replicas import ReplicaStack
from tests.support.sdk_stack import eventually

pytestmark = pytest.mark.slow

__all__ = ["redis_server"]  # the module fixture, imported for pytest

ACCESS: Final = "upstream-access-token-of-{}-7f3a"
REFRESH: Final = "upstream-refresh-token-of-{}-c91d"
LIMITED: Final = 'mcp_gateway_rate_limited_total{scope="login"}'


def user_oauth_overrides(tmp_path: Path, key: bytes) -> dict[str, Any]:
    """The group's one backend (``default``) as ``user_oauth`` (its server found from the
    upstream's metadata at a person's first consent: none happens here)."""
    (tmp_path / "upstream-key").write_text(base64.b64encode(key).decode())
    ring = {"seal_keys": [{"id": "u1", "key": {"file": str(tmp_path / "upstream-key")}}]}
    secret = {"file": "issuer-client-secret"}
    return {
        "backend": {
            "credential": {
                "type": "user_oauth",
                "token": None,
                "catalog_token": {"file": "backend-token"},
            }
        },
        "user_oauth": ring,
        "input_requests": ring,
        "login": {"client_id": "mcp-gateway", "client_secret": secret},
    }


async def admin(stack: ReplicaStack, action: str, body: Any, token: str = "") -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token or stack.admin_token}"}
    url = f"{stack.replicas[0].ops_url}/admin/upstream-tokens/{action}"
    async with stack.session.post(url, json=body, headers=headers) as response:
        return response.status, json.loads(await response.text())


async def seed(stack: ReplicaStack, redis: RedisServer, key: bytes, people: list[str]) -> None:
    """Each person's record at ``default``, written as a worker writes it."""
    config = json.loads((stack.workdir / "gateway-0.yaml").read_text())
    prefix = config["state"]["redis"]["key_prefix"]
    store = RedisStore(RedisConfig(url=Secret(redis.url, "test"), key_prefix=prefix))
    try:
        seal = RecordSeal((SealKey("u1", key),), "u1", resource=stack.resource)
        tokens = RedisUpstreamTokens(store, seal, max_idle_s=3600.0)
        for person in people:
            record = UpstreamRecord(
                issuer=stack.issuer.url,
                subject=person,
                backend="default",
                server=stack.issuer.url,
                client_id="mcp-gateway",
                access_token=ACCESS.format(person),
                refresh_token=REFRESH.format(person),
                expires_at=time.time() + 3600,
                scope="notes:read",
                connected_at=int(time.time()),
            )
            await tokens.put(owner_digest(stack.issuer.url, person), record, expect=None)
    finally:
        await store.close()


async def test_a_redis_group_lists_and_purges_the_records_of_every_replica(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    key = os.urandom(32)
    overrides = user_oauth_overrides(tmp_path, key)
    async with group(tmp_path, redis_server, overrides=overrides) as stack:
        await seed(stack, redis_server, key, ["alice", "bob"])
        status, body = await admin(stack, "list", {})
        assert status == 200, body
        people = sorted((r["backend"], r["subject"], r["state"]) for r in body["records"])
        assert people == [("default", "alice", "connected"), ("default", "bob", "connected")]
        text = json.dumps(body)
        for person in ("alice", "bob"):
            assert ACCESS.format(person) not in text and REFRESH.format(person) not in text
        # The operators' command against the group's ops listener, as its own process.
        done = stack.cli(
            "upstream-tokens",
            "purge",
            "--url",
            stack.replicas[0].ops_url,
            "--issuer",
            stack.issuer.url,
            "--subject",
            "alice",
        )
        assert done.returncode == 0, done.stderr
        assert "purged 1 record(s)" in done.stdout.splitlines()
        listed = stack.cli("upstream-tokens", "list", "--url", stack.replicas[0].ops_url)
        assert listed.returncode == 0, listed.stderr
        rows = [line for line in listed.stdout.splitlines() if line.startswith("default\t")]
        assert len(rows) == 1 and f"\t{stack.issuer.url}\tbob\tconnected\t" in rows[0]
        status, body = await admin(stack, "list", {"issuer": stack.issuer.url, "subject": "alice"})
        assert (status, body) == (200, {"records": []})
        # Refusals as a single gateway's: a wrong credential, a purge that names nothing.
        status, body = await admin(stack, "list", {}, token="c" * 64)
        assert status == 401 and body["error"] == "unauthorized"
        status, body = await admin(stack, "purge", {})
        assert status == 400 and body["error"] == "invalid_request"
        lines = log_lines(stack.replicas[0])
    purges = [line for line in lines if line.get("event") == "upstream_tokens_purged"]
    assert [(p["subject"], p["count"]) for p in purges] == [("alice", 1)]
    for line in lines:
        for person in ("alice", "bob"):
            assert ACCESS.format(person) not in json.dumps(line)


async def test_a_memory_group_asks_every_worker_and_503s_when_one_does_not_answer(
    tmp_path: Path,
) -> None:
    overrides = user_oauth_overrides(tmp_path, os.urandom(32))
    async with group(tmp_path, overrides=overrides) as stack:
        status, body = await admin(stack, "list", {"backend": "default"})
        assert (status, body) == (200, {"records": []})
        status, body = await admin(stack, "purge", {"backend": "default"})
        assert (status, body) == (200, {"purged": 0})

        def purges() -> int:
            lines = log_lines(stack.replicas[0])
            return sum(line.get("event") == "upstream_tokens_purged" for line in lines)

        # Each worker purged its own memory, and said so: the second worker's line may reach
        # the shared output a moment after the answer that merged both.
        await eventually(lambda: purges() >= 2)
        assert purges() == 2
        pids = [pid for pid in await worker_pids(stack) if pid is not None]
        assert len(pids) == 2
        os.kill(pids[1], signal.SIGSTOP)
        try:
            status, body = await admin(stack, "list", {})
        finally:
            os.kill(pids[1], signal.SIGCONT)
        assert status == 503 and body["error"] == "unavailable"
        assert "no-store" in (await _headers(stack)).get("Cache-Control", "")


async def _headers(stack: ReplicaStack) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {stack.admin_token}"}
    url = f"{stack.replicas[0].ops_url}/admin/upstream-tokens/list"
    async with stack.session.post(url, json={}, headers=headers) as response:
        assert response.status == 200
        return dict(response.headers)


@pytest.mark.row("login_rate_limited")
async def test_the_login_surfaces_budget_is_shared_by_the_workers_through_redis(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    overrides = user_oauth_overrides(tmp_path, os.urandom(32))
    overrides["login"]["pre_auth_rate"] = "4/hour"
    async with group(tmp_path, redis_server, overrides=overrides) as stack:
        url = f"http://127.0.0.1:{stack.replicas[0].port}/gateway/account"
        statuses: list[int] = []
        for _ in range(20):  # each on a connection of its own: SO_REUSEPORT spreads them
            connector = aiohttp.TCPConnector(force_close=True)
            async with (
                aiohttp.ClientSession(connector=connector) as session,
                session.get(url, allow_redirects=False) as response,
            ):
                statuses.append(response.status)
                if response.status == 429:
                    assert int(response.headers["Retry-After"]) >= 1
        refused = [
            sample(await worker_metrics(stack.replicas[0], slot), LIMITED) for slot in (0, 1)
        ]
    # Four in the whole group, not four per worker, although both workers answered.
    assert statuses == [303] * 4 + [429] * 16
    assert sum(refused) == 16 and all(count > 0 for count in refused), refused
