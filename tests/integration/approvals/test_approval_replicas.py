"""Two replicas of one gateway on a real redis-server share the approval records: a call held at
one is approved at the other's page and runs once, at whichever replica the retry reaches; two
decisions racing at both replicas, one wins; the webhook tells an approver set, never the
arguments."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from gateway.dev.dev_issuer import DevIssuer
from tests.support.approval_stack import APPROVAL_KEY, ApprovalStack, approval_stack, decide
from tests.support.live_stack import ServerFactory
from tests.support.login_stack import USERS, HttpBrowser, csrf_of, sign_in
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer, redis_server, unique_prefix

__all__ = ["redis_server"]

ARGS = {"text": "wire 500", "secret": "s3cr3t-account"}
HOOK_TOKEN = "approval-hook-token-5e1f"


@contextlib.asynccontextmanager
async def replicas(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    redis: RedisServer,
    hook_url: str,
) -> AsyncIterator[tuple[ApprovalStack, ApprovalStack]]:
    monkeypatch.setenv("APPROVAL_REDIS_URL", redis.url)
    monkeypatch.setenv("APPROVAL_HOOK_TOKEN", HOOK_TOKEN)
    first, second = free_port("127.0.0.1"), free_port("127.0.0.1")
    shared: dict[str, Any] = {
        "resource": f"http://127.0.0.1:{first}/mcp",
        "state": {
            "backend": "redis",
            "redis": {
                "url": {"env": "APPROVAL_REDIS_URL"},
                "key_prefix": unique_prefix(),
                "timeout_ms": 2000,
            },
        },
        "approvals": {
            "wait_s": 0.5,
            "webhook": {
                "url": hook_url,
                "allow_insecure_http": True,
                "timeout_s": 2,
                "credential": {"type": "bearer", "token": {"env": "APPROVAL_HOOK_TOKEN"}},
            },
        },
    }
    issuer = DevIssuer(users=USERS, token_format="jwt")
    await issuer.start()
    try:
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        async with (
            approval_stack(
                tmp_path / "a", aiohttp_server, monkeypatch, dev=issuer, port=first, gateway=shared
            ) as a,
            approval_stack(
                tmp_path / "b",
                aiohttp_server,
                monkeypatch,
                dev=issuer,
                port=second,
                gateway={**shared, "listen": {"host": "127.0.0.1", "port": second}},
            ) as b,
        ):
            yield a, b
    finally:
        await issuer.stop()


async def test_two_replicas_share_the_records_and_the_webhook_tells_approvers(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    redis_server: RedisServer,
) -> None:
    posted: list[dict[str, Any]] = []

    async def hook(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {HOOK_TOKEN}":
            return web.Response(status=401)
        posted.append(json.loads(await request.read()))
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    hook_server = await aiohttp_server(app)
    hook_url = str(hook_server.make_url("/hook"))
    async with (
        replicas(tmp_path, aiohttp_server, monkeypatch, redis_server, hook_url) as (a, b),
        aiohttp.ClientSession() as session,
    ):
        # Held at A (by self), approved at B's page, run at B: once.
        status, _, text = await a.call("alice", "wipe", ARGS)
        first = json.loads(text)["result"]
        link = first["inputRequests"][APPROVAL_KEY]["params"]["url"]
        alice = HttpBrowser(session, a.login.origin, aliases=(b.login.origin,))
        await sign_in(alice, b.login, "alice")
        b_link = link.replace(a.login.origin, b.login.origin)
        status, done = await decide(alice, b, b_link, "alice")
        assert status == 200 and "Approved" in done
        retries = await asyncio.gather(
            b.retry("alice", "wipe", ARGS, first["requestState"]),
            a.retry("alice", "wipe", ARGS, first["requestState"]),
        )
        ran = [r for r in retries if r[0] == 200]
        refused = [r for r in retries if r[0] == 403]
        assert len(ran) == 1 and len(refused) == 1, retries
        assert json.loads(refused[0][2])["error"]["data"] == {"reason": "used"}
        assert a.runs("wipe") + b.runs("wipe") == [ARGS]

        # An approver set's request: the webhook is told (no arguments); two decisions race.
        status, _, text = await b.call("alice", "pay", ARGS)
        pay = json.loads(text)["result"]
        pay_link = pay["inputRequests"][APPROVAL_KEY]["params"]["url"]
        for _ in range(100):
            if posted:
                break
            await asyncio.sleep(0.05)
        (message,) = posted
        assert message["url"] == pay_link and message["approvers"] == "groups=payments"
        assert message["tool"] == "pay" and "s3cr3t" not in json.dumps(message)
        bob = HttpBrowser(session, a.login.origin, aliases=(b.login.origin,))
        await sign_in(bob, a.login, "bob")
        status, _, page = await bob.get(pay_link)
        csrf = csrf_of(page)
        answers = await asyncio.gather(
            bob.post(pay_link, {"csrf": csrf, "decision": "approve"}),
            bob.post(
                pay_link.replace(a.login.origin, b.login.origin),
                {"csrf": csrf, "decision": "deny"},
            ),
        )
        assert sorted(answer[0] for answer in answers) == [200, 409]
        assert (await bob.get(b.login.url("/approvals")))[2].count("/approve/") == 0
