"""A revoked token's open streams end within a second, on every replica, in both eras.

``subscriptions/listen`` (2026-07-28) and a legacy session's GET stream (2025-11-25) stay open
long after the request that authenticated them; a revocation (``POST /admin/revoke`` on this
replica, or on another one and pushed over Redis pub/sub) must reach them too, not only the
next request. Raw SSE clients over real HTTP: the gateway in this process for the local case,
two ``mcp-gateway serve`` processes sharing a real redis-server for the pushed one.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.support.live_stack import MODERN, ServerFactory, live_stack, modern_meta
from tests.support.policy import policy_text
from tests.support.redis_server import RedisServer, redis_server
from tests.support.replicas import replica_stack
from tests.support.sse_reading import complete, next_message, rest_of
from tests.support.upstreams import ModernUpstream

__all__ = ["redis_server"]

POLICY = policy_text(tools={"echo": ""})
ADMIN = "streams-admin-token-0123456789abcdef0123"
LEGACY = "2025-11-25"
LISTEN = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "subscriptions/listen",
    "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": True}},
}


async def open_streams(
    http: aiohttp.ClientSession, mcp_url: str, token: str
) -> tuple[aiohttp.ClientResponse, aiohttp.ClientResponse]:
    """A ``subscriptions/listen`` stream (acknowledged) and a legacy session's GET stream."""
    auth = {"Authorization": f"Bearer {token}"}
    listen = await http.post(
        mcp_url,
        json=LISTEN,
        headers={
            **auth,
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "subscriptions/listen",
        },
    )
    assert listen.status == 200, await listen.text()
    assert (await next_message(listen))["method"] == "notifications/subscriptions/acknowledged"
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    async with http.post(
        mcp_url, json=init, headers={**auth, "Accept": "application/json, text/event-stream"}
    ) as response:
        assert response.status == 200
        sid = response.headers["Mcp-Session-Id"]
    get = await http.get(
        mcp_url, headers={**auth, "Accept": "text/event-stream", "Mcp-Session-Id": sid}
    )
    assert get.status == 200
    return listen, get


async def test_a_revocation_here_ends_the_tokens_streams_and_only_those(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMS_ADMIN_TOKEN", ADMIN)
    upstream = ModernUpstream(list_changed=True)
    async with (
        live_stack(
            tmp_path,
            aiohttp_server,
            monkeypatch,
            upstream=upstream,
            policy=POLICY,
            gateway={"admin": {"token": {"env": "STREAMS_ADMIN_TOKEN"}}},
        ) as live,
        aiohttp.ClientSession() as http,
    ):
        token = live.token("mcp:access")
        other = live.token("mcp:access")  # the same caller's other token
        listen, get = await open_streams(http, live.server.mcp_url, token)
        kept, kept_get = await open_streams(http, live.server.mcp_url, other)
        started = time.monotonic()
        async with http.post(
            live.server.ops_url + "/admin/revoke",
            json={"token": token},
            headers={"Authorization": f"Bearer {ADMIN}"},
        ) as response:
            assert response.status == 200, await response.text()
        ended = await asyncio.gather(rest_of(listen, 1.0), rest_of(get, 1.0))
        assert time.monotonic() - started <= 1.0
        assert complete(ended[0])
        upstream.announce()
        assert (await next_message(kept))["method"] == "notifications/tools/list_changed"
        async with http.post(
            live.server.mcp_url,
            json=LISTEN,
            headers={
                "Authorization": f"Bearer {token}",
                "MCP-Protocol-Version": MODERN,
                "Mcp-Method": "subscriptions/listen",
                "Accept": "application/json, text/event-stream",
            },
        ) as again:
            assert again.status == 401
        kept.close()
        kept_get.close()


async def in_flight(http: aiohttp.ClientSession, ops_url: str) -> float:
    async with http.get(ops_url + "/metrics") as response:
        for line in (await response.text()).splitlines():
            if line.startswith("mcp_gateway_in_flight "):
                return float(line.split()[1])
    return 0.0


async def test_a_token_revoked_while_its_listen_arrived_opens_no_stream(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Accepted before the body arrived, revoked before the stream registered: 401, not a
    stream that no revocation can reach any more."""
    monkeypatch.setenv("STREAMS_ADMIN_TOKEN", ADMIN)
    async with (
        live_stack(
            tmp_path,
            aiohttp_server,
            monkeypatch,
            upstream=ModernUpstream(list_changed=True),
            policy=POLICY,
            gateway={"admin": {"token": {"env": "STREAMS_ADMIN_TOKEN"}}},
        ) as live,
        aiohttp.ClientSession() as http,
    ):
        token = live.token("mcp:access")
        data, rest = json.dumps(LISTEN).encode(), asyncio.Event()

        async def body() -> AsyncIterator[bytes]:
            yield data[:10]
            await rest.wait()
            yield data[10:]

        request = asyncio.ensure_future(
            http.post(
                live.server.mcp_url,
                data=body(),
                headers={
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": MODERN,
                    "Mcp-Method": "subscriptions/listen",
                },
            )
        )
        async with asyncio.timeout(10):
            # A readiness poll of the metric: the request is authenticated, its body arriving.
            while await in_flight(http, live.server.ops_url) != 1:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        async with http.post(
            live.server.ops_url + "/admin/revoke",
            json={"token": token},
            headers={"Authorization": f"Bearer {ADMIN}"},
        ) as response:
            assert response.status == 200
        rest.set()
        async with asyncio.timeout(10):
            response = await request
        response.close()  # a stream, on the old code: not read
        assert response.status == 401
        assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]


async def test_a_revocation_on_another_replica_ends_the_streams_here(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with (
        replica_stack(tmp_path, redis_server, policy=POLICY, list_changed=True) as stack,
        aiohttp.ClientSession() as http,
    ):
        a, b = stack.replicas
        token = stack.mint("alice")
        listen, get = await open_streams(http, b.mcp_url, token)
        started = time.monotonic()
        status, body = await stack.revoke(a, {"token": token})
        assert status == 200 and body["revoked"] == "all_replicas", body
        ended = await asyncio.gather(rest_of(listen, 1.0), rest_of(get, 1.0))
        assert time.monotonic() - started <= 1.0
        assert complete(ended[0])
        for replica in (a, b):
            assert token not in replica.log()
