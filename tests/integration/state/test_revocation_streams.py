"""A revoked token's open streams end within a second, on every replica, in both eras; a
stopping replica's too.

``subscriptions/listen`` (2026-07-28) and a legacy session's GET stream (2025-11-25) stay open
long after the request that authenticated them; a revocation (``POST /admin/revoke`` on this
replica, or on another one and pushed over Redis pub/sub) must reach them too, not only the
next request. Raw SSE clients over real HTTP: the gateway in this process for the local case,
two ``mcp-gateway serve`` processes sharing a real redis-server for the pushed one.

A stream is not work in flight: on SIGTERM it ends at once while a tool call in flight is
answered, and the process (or the group of ``--workers``), its Redis subscription and its
listens at the backend included, is gone within seconds, not after the drain timeout.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.support.live_stack import MODERN, MakeStack, modern_meta
from tests.support.mcp_client import legacy_initialize_body
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


async def open_listen(
    http: aiohttp.ClientSession, mcp_url: str, token: str
) -> aiohttp.ClientResponse:
    """A ``subscriptions/listen`` stream, acknowledged."""
    listen = await http.post(
        mcp_url,
        json=LISTEN,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "subscriptions/listen",
        },
    )
    assert listen.status == 200, await listen.text()
    assert (await next_message(listen))["method"] == "notifications/subscriptions/acknowledged"
    return listen


async def open_streams(
    http: aiohttp.ClientSession, mcp_url: str, token: str
) -> tuple[aiohttp.ClientResponse, aiohttp.ClientResponse]:
    """A ``subscriptions/listen`` stream (acknowledged) and a legacy session's GET stream."""
    auth = {"Authorization": f"Bearer {token}"}
    listen = await open_listen(http, mcp_url, token)
    init = legacy_initialize_body(LEGACY)
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
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAMS_ADMIN_TOKEN", ADMIN)
    upstream = ModernUpstream(list_changed=True)
    async with (
        make_stack(
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
        status, text = await live.revoke(token, ADMIN)
        assert status == 200, text
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
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Accepted before the body arrived, revoked before the stream registered: 401, not a
    stream that no revocation can reach any more."""
    monkeypatch.setenv("STREAMS_ADMIN_TOKEN", ADMIN)
    async with (
        make_stack(
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
        assert (await live.revoke(token, ADMIN))[0] == 200
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


@pytest.mark.parametrize("serve_args", [(), ("--workers", "2")], ids=["process", "workers"])
async def test_sigterm_ends_the_streams_at_once_answers_the_call_and_exits_within_seconds(
    redis_server: RedisServer, tmp_path: Path, serve_args: tuple[str, ...]
) -> None:
    """``drain_timeout_s`` at its default (10 s): the open streams (and the Redis subscription,
    and the replica's listens at the backend) must not hold the stop for it. A worker of
    ``--workers`` offers no legacy session: there, a listen only."""
    policy = policy_text(tools={"echo": "", "hold": ""})
    overrides = {"limits": {"drain_timeout_s": None}}  # None: the key removed, the default
    async with (
        replica_stack(
            tmp_path,
            redis_server,
            replicas=1,
            policy=policy,
            overrides=overrides,
            serve_args=serve_args,
            hold_s=2.0,
            list_changed=True,
        ) as stack,
        aiohttp.ClientSession() as http,
    ):
        (replica,) = stack.replicas
        assert replica.process is not None
        token = stack.mint("alice")
        if serve_args:
            streams = [await open_listen(http, replica.mcp_url, token)]
        else:
            streams = list(await open_streams(http, replica.mcp_url, token))
        assert stack.upstream.streams_opened >= 1  # the gateway listens at the backend too
        call = asyncio.create_task(stack.call(replica, token, "hold", text="in flight"))
        await asyncio.wait_for(stack.upstream.holding.wait(), 10)
        sent = time.monotonic()
        replica.process.send_signal(signal.SIGTERM)

        ended = await asyncio.gather(*(rest_of(stream, 1.5) for stream in streams))
        assert complete(ended[0])  # the listen's graceful end (§Graceful Closure)
        assert not call.done()  # the streams did not wait for the call

        status, body, _ = await asyncio.wait_for(call, 10)
        assert status == 200, body
        assert body["result"]["isError"] is False  # answered, not the drain's timeout error
        assert await asyncio.to_thread(replica.process.wait, 10) == 0
        assert time.monotonic() - sent < 5.0, replica.log()[-3000:]
        assert '"gateway.stopped"' in replica.log()
        leaving = time.monotonic()
    # The backend's listens whose client (the gateway) exited do not hold its stop either.
    assert time.monotonic() - leaving < 5.0
