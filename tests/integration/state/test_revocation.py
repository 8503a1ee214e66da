"""Revocation at the gateway: ``mcp-gateway revoke`` / ``POST /admin/revoke`` on one replica,
refused by every replica within a second, after a restart, and (fail closed) while Redis is down.

Real processes throughout: gateway replicas (``tests/support/replicas.py``), redis-server, the
development issuer (which keeps saying the token is active: only the gateway revoked it).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.redis_server import RedisServer, redis_server
from tests.support.replicas import Replica, ReplicaStack, replica_stack

__all__ = ["redis_server"]


async def refused_within(
    stack: ReplicaStack, replica: Replica, token: str, seconds: float
) -> float:
    """Seconds until ``replica`` answers ``token`` with 401, failing after ``seconds``."""
    started = time.monotonic()
    while True:
        status, _, _ = await stack.post(replica, token, "tools/list")
        elapsed = time.monotonic() - started
        if status == 401:
            return elapsed
        assert status == 200, status
        if elapsed > seconds:
            pytest.fail(f"replica {replica.name} still accepts the revoked token after {seconds}s")
        await asyncio.sleep(0.02)


def audit_events(replica: Replica, event: str) -> list[dict[str, Any]]:
    events = []
    for line in replica.log().splitlines():
        if line.startswith("{") and '"log":"audit"' in line:
            record = json.loads(line)
            if record.get("event") == event:
                events.append(record)
    return events


async def test_revoke_on_a_is_refused_by_b_within_a_second_and_after_b_restarts(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with replica_stack(tmp_path, redis_server) as stack:
        a, b = stack.replicas
        token, other = stack.mint("alice"), stack.mint("bob")
        for replica in (a, b):  # both replicas have the tokens cached now
            for t in (token, other):
                assert (await stack.post(replica, t, "tools/list"))[0] == 200
        result = await asyncio.to_thread(
            stack.cli, "revoke", "--url", a.ops_url, "--token-file", "-", stdin=token + "\n"
        )
        assert result.returncode == 0, result.stderr
        assert "revoked (all_replicas)" in result.stdout
        assert await refused_within(stack, b, token, 1.0) <= 1.0
        status, body, headers = await stack.post(a, token, "tools/list")
        assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]
        assert body["error"]["code"] == -31401
        # Only that token: the other one, cached on both replicas, keeps working.
        for replica in (a, b):
            assert (await stack.post(replica, other, "tools/list"))[0] == 200
        await stack.restart(b)  # empty cache; the issuer still says "active"
        assert (await stack.post(b, token, "tools/list"))[0] == 401
        assert (await stack.post(b, other, "tools/list"))[0] == 200
        # The audit trail of the replica that took the request records the revocation (an
        # opaque token's revocation key is its SHA-256).
        digest = hashlib.sha256(token.encode()).hexdigest()
        (event,) = audit_events(a, "token_revoked")
        assert event["revocation_key"] == digest and event["token_fp"] == digest[:12]
        assert event["reached"] == "all_replicas" and event["until"].endswith("Z")
        assert "token_revocation_applied" in b.log() or "token_revocations_synced" in b.log()
        for replica in (a, b):
            assert token not in replica.log()


async def test_revoke_by_key_and_the_admin_endpoint_refusals(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with replica_stack(tmp_path, redis_server) as stack:
        a, b = stack.replicas
        token = stack.mint()
        assert (await stack.post(b, token, "tools/list"))[0] == 200
        digest = hashlib.sha256(token.encode()).hexdigest()
        url = a.ops_url + "/admin/revoke"

        async def post(headers: dict[str, str], data: bytes) -> tuple[int, Any]:
            async with stack.session.post(url, data=data, headers=headers) as response:
                return response.status, await response.json()

        good = {"Authorization": f"Bearer {stack.admin_token}", "Content-Type": "application/json"}
        body = json.dumps({"revocation_key": digest}).encode()
        assert (await post({"Content-Type": "application/json"}, body))[0] == 401
        wrong = {**good, "Authorization": "Bearer " + "0" * 64}
        status, reply = await post(wrong, body)
        assert status == 401 and reply["error"] == "unauthorized"
        assert (await post({**good, "Content-Type": "text/plain"}, body))[0] == 415
        for bad in (
            {"revocation_key": digest[:12]},  # the log fingerprint: too short to name one token
            {"revocation_key": digest, "token": token},
            # The SHA-256 of a JWT's bytes names one spelling of it: refused, not half-applied.
            {"token_sha256": digest},
            {"revocation_key": digest, "exp": "tomorrow"},
            {"revocation_key": digest, "exp": True},
            {"revocation_key": digest, "iss": 7},
            {"revocation_key": digest, "scope": "x"},
            {"exp": 1},
            {"token": ""},
            {},
            [digest],
        ):
            status, reply = await post(good, json.dumps(bad).encode())
            assert status == 400, bad
            assert reply["error"] == "invalid_request"
        status, reply = await post(good, json.dumps({"token_sha256": digest}).encode())
        assert "revocation_key" in reply["error_description"]
        status, reply = await post(good, b'{"token": ' + b'"x' * 9000 + b'"}')
        assert status in (400, 413)
        assert (await stack.post(b, token, "tools/list"))[0] == 200  # nothing was revoked yet
        status, reply = await stack.revoke(a, {"revocation_key": digest.upper()})
        assert status == 200 and reply["revoked"] == "all_replicas"
        assert reply["token_fp"] == digest[:12] and reply["revocation_key"] == digest
        assert await refused_within(stack, b, token, 1.0) <= 1.0
        # The CLI takes a key as the audit trail records it.
        second = stack.mint("bob")
        assert (await stack.post(b, second, "tools/list"))[0] == 200
        key = hashlib.sha256(second.encode()).hexdigest()
        result = await asyncio.to_thread(stack.cli, "revoke", "--url", a.ops_url, "--key", key)
        assert result.returncode == 0, result.stderr
        assert await refused_within(stack, b, second, 1.0) <= 1.0
        result = await asyncio.to_thread(stack.cli, "revoke", "--url", a.ops_url, "--sha256", key)
        assert result.returncode == 2  # the old option is gone: it named one spelling of a JWT


async def test_without_an_admin_token_there_is_no_admin_endpoint(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with replica_stack(
        tmp_path, redis_server, replicas=1, overrides={"admin": {"token": None}}
    ) as stack:
        (a,) = stack.replicas
        status, _ = await stack.revoke(a, {"revocation_key": "0" * 64})
        assert status == 404


async def test_with_the_memory_backend_revoke_works_on_the_one_replica(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    overrides = {"state": {"backend": "memory", "redis": None}}
    async with replica_stack(tmp_path, redis_server, replicas=1, overrides=overrides) as stack:
        (a,) = stack.replicas
        token = stack.mint()
        assert (await stack.post(a, token, "tools/list"))[0] == 200
        status, reply = await stack.revoke(a, {"token": token})
        assert status == 200 and reply["revoked"] == "this_replica"
        assert (await stack.post(a, token, "tools/list"))[0] == 401
        assert token not in a.log()


async def test_a_revoked_token_costs_the_issuer_nothing_however_often_it_is_retried(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with replica_stack(tmp_path, redis_server) as stack:
        a, b = stack.replicas
        token = stack.mint()
        assert (await stack.post(a, token, "tools/list"))[0] == 200
        status, _ = await stack.revoke(a, {"token": token})
        assert status == 200
        await refused_within(stack, b, token, 1.0)
        before = stack.issuer.introspection_calls
        for replica in (a, b) * 10:
            status, _, headers = await stack.post(replica, token, "tools/list")
            assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]
        # Known revoked on both replicas: refused before any issuer call and never charged to
        # the failed-auth budget (20 retries, still 401 rather than 429).
        assert stack.issuer.introspection_calls == before


async def test_a_revocation_outlives_a_redis_restart_and_one_redis_did_not_take(
    tmp_path: Path,
) -> None:
    """Redis without persistence (the shipped example) restarts: the replicas that know the
    revocations write the markers back, so a replica started afterwards still refuses the
    token. A revocation taken while Redis was down (503 this_replica_only) reaches the other
    replica once Redis is back, even if nobody retries it."""
    redis = RedisServer.launch(tmp_path / "redis")
    try:
        async with replica_stack(tmp_path / "stack", redis) as stack:
            a, b = stack.replicas
            early, late = stack.mint("early"), stack.mint("late")
            for token in (early, late):
                assert (await stack.post(b, token, "tools/list"))[0] == 200
            assert (await stack.revoke(a, {"token": early}))[0] == 200
            assert await refused_within(stack, b, early, 1.0) <= 1.0
            redis.stop()
            status, reply = await stack.revoke(a, {"token": late})
            assert (status, reply["revoked"]) == (503, "this_replica_only")
            assert (await stack.post(b, late, "tools/list"))[0] == 200  # cached on B, not told
            redis.start()  # empty: every marker is gone
            # B is told about the late revocation without anyone retrying it.
            assert await refused_within(stack, b, late, 15.0) <= 15.0
            await stack.restart(b)  # a replica that knows nothing but what Redis has
            for token in (early, late):
                status, _, headers = await stack.post(b, token, "tools/list")
                assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]
    finally:
        redis.destroy()


@pytest.mark.row("revocation_unavailable")
async def test_revocation_fails_closed_while_redis_is_down_when_configured(
    tmp_path: Path,
) -> None:
    redis = RedisServer.launch(tmp_path / "redis")
    overrides = {"state": {"on_store_error": {"revocation": "deny"}}}
    try:
        async with replica_stack(
            tmp_path / "stack", redis, replicas=1, overrides=overrides
        ) as stack:
            (a,) = stack.replicas
            cached = stack.mint("cached")
            assert (await stack.post(a, cached, "tools/list"))[0] == 200
            redis.stop()
            fresh = stack.mint("fresh")
            status, body, headers = await stack.post(a, fresh, "tools/list")
            assert status == 503, body
            assert int(headers["Retry-After"]) >= 1
            assert headers["WWW-Authenticate"].startswith("Bearer resource_metadata=")
            assert "error=" not in headers["WWW-Authenticate"]
            assert body == {
                "error": "revocation_unavailable",
                "error_description": "Authorization server unavailable, retry later",
            }
            # A token this replica already holds keeps working: nothing new to check.
            assert (await stack.post(a, cached, "tools/list"))[0] == 200
            metric = 'mcp_gateway_rejections_total{row="revocation_unavailable"}'
            assert await stack.metric(a, metric) == 1
            redis.start()
            await asyncio.sleep(1.1)  # past the store's back-off
            assert (await stack.post(a, fresh, "tools/list"))[0] == 200
    finally:
        redis.destroy()
