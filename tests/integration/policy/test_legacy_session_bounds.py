"""The bounds of legacy sessions (2025-11-25 wire), shared with ``subscriptions/listen``.

What counts (gateway/http/subscriptions/subscription_hub.py): a subscribed URI, against the
principal's ``max_subscribed_uris_per_principal`` with the listens' URIs; an attached GET stream,
against the principal's share of GET streams (a quarter of ``max_subscriptions``) and the replica's
``max_subscriptions``, while it is attached. A session takes none of the principal's listen slots:
the field finding was a client that only opened the GET stream, took one of its caller's four slots
and kept it for 30 s after leaving, until the next GET got 429 and the same user's 2026 listen was
refused too. Raw HTTP clients, the official SDK's server behind the gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.errors import RATE_LIMITED_CODE
from gateway.http.subscriptions import legacy_sessions
from tests.integration.policy.test_legacy_subscriptions_http import (
    GUIDE,
    KEYS,
    LEGACY,
    LIMITS,
    POLICY,
    initialize,
    stream_headers,
    subscribe,
)
from tests.support import sdk_stack as shared
from tests.support.live_stack import MODERN, LiveStack, MakeStack, modern_meta
from tests.support.sdk_stack import listeners, sdk_stack, sdk_stack_fixture
from tests.support.sdk_upstream import SdkUpstream

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
eventually = functools.partial(shared.eventually, within=10.0)
LISTEN_HEADERS = {
    "MCP-Protocol-Version": MODERN,
    "Mcp-Method": "subscriptions/listen",
    "Accept": "application/json, text/event-stream",
}


@contextlib.asynccontextmanager
async def get_stream(live: LiveStack, token: str, sid: str) -> AsyncIterator[int]:
    """A session's GET stream, open while the block runs; yields its status."""
    async with live.session.get(live.server.mcp_url, headers=stream_headers(token, sid)) as got:
        yield got.status


@contextlib.asynccontextmanager
async def listen(live: LiveStack, token: str, *uris: str) -> AsyncIterator[tuple[int, Any]]:
    """A 2026-07-28 ``subscriptions/listen``, open while the block runs; yields its status and
    its first message (the acknowledgment) or error body."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {
            "_meta": modern_meta(),
            "notifications": {"toolsListChanged": True, "resourceSubscriptions": list(uris)},
        },
    }
    async with live.session.post(
        live.server.mcp_url,
        json=body,
        headers={"Authorization": f"Bearer {token}", **LISTEN_HEADERS},
    ) as response:
        if response.status != 200:
            yield response.status, await response.json()
            return
        while not (line := await response.content.readline()).startswith(b"data: "):
            assert line, "the stream ended"
        yield 200, json.loads(line[6:])


stack = sdk_stack_fixture(POLICY, {"limits": LIMITS})


async def test_a_get_stream_with_nothing_subscribed_holds_no_slot(
    stack: tuple[LiveStack, SdkUpstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    live, sdk = stack
    monkeypatch.setattr(legacy_sessions, "IDLE_S", 0.2)
    token = live.token("mcp:access docs:read tools:echo")  # hears the tools' list_changed
    per_principal = LIMITS["max_subscriptions_per_principal"]
    # One GET-only client after another, each leaving without DELETE (a closed Inspector).
    sids = [(await initialize(live, token))[0]["Mcp-Session-Id"] for _ in range(per_principal + 1)]
    for sid in sids:
        async with get_stream(live, token, sid) as status:
            assert status == 200
            await eventually(lambda: listeners(sdk) == 1)
        await eventually(lambda: listeners(sdk) == 0)  # the gateway saw it go
    # All of them open at once, and the same caller's listens next to them.
    async with contextlib.AsyncExitStack() as streams:
        for sid in sids:
            assert await streams.enter_async_context(get_stream(live, token, sid)) == 200
        for _ in range(per_principal):
            status, ack = await streams.enter_async_context(listen(live, token))
            assert status == 200, ack
            assert ack["method"] == "notifications/subscriptions/acknowledged"
    # Nothing was ended either: the ids still work, for a GET and for any request.
    tools = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    status, _, text = await live.post(token, tools, {"Mcp-Session-Id": sids[0], **LEGACY})
    assert status == 200 and "tools" in json.loads(text)["result"], text
    async with get_stream(live, token, sids[0]) as status:
        assert status == 200
    # A refused subscribe leaves nothing behind: past IDLE_S there is no session to end.
    session = {"Mcp-Session-Id": sids[1], **LEGACY}
    status, _, text = await live.post(token, subscribe(KEYS), session)
    assert json.loads(text)["error"]["code"] == -32002, text
    await asyncio.sleep(0.5)  # a negative check: nothing may happen meanwhile
    status, _, text = await live.post(token, tools, session)
    assert status == 200, text


@pytest.mark.row("too_many_subscriptions")
async def test_uris_per_principal_at_and_past_the_bound_across_sessions_and_listens(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, _ = stack
    token = live.token("mcp:access docs:read")
    first = {"Mcp-Session-Id": (await initialize(live, token))[0]["Mcp-Session-Id"], **LEGACY}
    for i, uri in enumerate((GUIDE, "docs://guide/a", "docs://guide/b")):  # at the bound (3)
        status, _, text = await live.post(token, subscribe(uri, rid=i), first)
        assert status == 200 and "error" not in json.loads(text), text
    again = await live.post(token, subscribe(GUIDE, rid=7), first)
    assert again[0] == 200 and "error" not in json.loads(again[2])  # already counted
    status, headers, text = await live.post(token, subscribe("docs://guide/c"), first)
    assert status == 429, text
    assert "Retry-After" not in headers and headers["Cache-Control"] == "no-store"
    assert json.loads(text)["error"] == {
        "code": RATE_LIMITED_CODE,
        "message": "Too many subscriptions",
    }
    # The URIs are counted with the listens' (one more is past the bound there too), but a
    # session takes no listen slot: the caller's two listens are open next to it.
    async with listen(live, token, "docs://guide/c") as (status, body):
        assert status == 429 and body["error"]["code"] == RATE_LIMITED_CODE
    async with listen(live, token) as (one, _), listen(live, token) as (two, _):
        assert one == two == 200
    # An unsubscribe gives its URI back, to another session of the caller.
    unsubscribe = subscribe("docs://guide/b", method="resources/unsubscribe")
    assert (await live.post(token, unsubscribe, first))[0] == 200
    second = {"Mcp-Session-Id": (await initialize(live, token))[0]["Mcp-Session-Id"], **LEGACY}
    status, _, text = await live.post(token, subscribe("docs://guide/c"), second)
    assert status == 200 and "error" not in json.loads(text), text
    assert (await live.post(token, subscribe("docs://guide/d"), second))[0] == 429
    # A DELETE gives back the session's URIs at once.
    async with live.session.delete(
        live.server.mcp_url,
        headers={"Authorization": f"Bearer {token}", "Mcp-Session-Id": first["Mcp-Session-Id"]},
    ) as response:
        assert response.status == 204
    for uri in ("docs://guide/d", "docs://guide/e"):
        assert (await live.post(token, subscribe(uri), second))[0] == 200
    # Another subject has its own share.
    bob = live.token("mcp:access docs:read", sub="bob")
    bob_sid = {"Mcp-Session-Id": (await initialize(live, bob))[0]["Mcp-Session-Id"], **LEGACY}
    assert (await live.post(bob, subscribe("docs://guide/f"), bob_sid))[0] == 200


@pytest.mark.row("too_many_subscriptions")
async def test_get_streams_per_principal_at_and_past_their_share(make_stack: MakeStack) -> None:
    """A quarter of ``max_subscriptions`` (8 here: 2 GET streams) per principal, so one caller
    cannot take the replica's streams; listens are not in that count."""
    async with make_stack.of(
        sdk_stack,
        policy=POLICY,
        gateway={"limits": {"max_subscriptions": 8}},
    ) as (live, sdk):
        token = live.token("mcp:access docs:read tools:echo")  # a backend listen per stream
        sids = [(await initialize(live, token))[0]["Mcp-Session-Id"] for _ in range(3)]
        async with get_stream(live, token, sids[0]) as one:
            async with get_stream(live, token, sids[1]) as two:
                assert one == two == 200  # at the share
                async with live.session.get(
                    live.server.mcp_url, headers=stream_headers(token, sids[2])
                ) as third:
                    assert third.status == 429
                    assert "Retry-After" not in third.headers
                    assert (await third.json())["error"]["code"] == RATE_LIMITED_CODE
                async with listen(live, token) as (status, _):
                    assert status == 200
                bob = live.token("mcp:access docs:read", sub="bob")
                bob_sid = (await initialize(live, bob))[0]["Mcp-Session-Id"]
                async with get_stream(live, bob, bob_sid) as status:
                    assert status == 200
            # The second one ended (the gateway closed its backend listen): its share is free.
            await eventually(lambda: listeners(sdk) == 1)
            async with get_stream(live, token, sids[2]) as status:
                assert status == 200


@pytest.mark.row("over_capacity")
async def test_streams_per_replica_at_and_past_the_bound(make_stack: MakeStack) -> None:
    async with make_stack.of(
        sdk_stack,
        policy=POLICY,
        gateway={"limits": {"max_subscriptions": 2}},
    ) as (live, _sdk):
        tokens = [live.token("mcp:access docs:read", sub=sub) for sub in "abc"]
        sids = [(await initialize(live, t))[0]["Mcp-Session-Id"] for t in tokens]
        async with get_stream(live, tokens[0], sids[0]) as a, listen(live, tokens[1]) as (b, _):
            assert a == b == 200  # at the bound: a GET stream and a listen
            # A subscription without a stream holds none of the replica's streams.
            status, _, text = await live.post(
                tokens[2], subscribe(GUIDE), {"Mcp-Session-Id": sids[2], **LEGACY}
            )
            assert status == 200 and "error" not in json.loads(text), text
            async with live.session.get(
                live.server.mcp_url, headers=stream_headers(tokens[2], sids[2])
            ) as response:
                assert response.status == 503
                assert response.headers["Retry-After"] == "1"
                assert (await response.json())["error"] == "over_capacity"
            async with listen(live, tokens[2]) as (status, body):
                assert status == 503 and body["error"] == "over_capacity"
