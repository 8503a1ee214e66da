"""Legacy ``resources/subscribe`` through the gateway (2025 eras), the official SDK on both sides.

The SDK's ``Client(mode="legacy")`` initializes, gets the gateway's ``Mcp-Session-Id`` and opens
the session's GET stream; ``subscribe_resource`` / ``unsubscribe_resource`` are POSTs of that
session. Behind the gateway the SDK's ``MCPServer`` publishes on its subscription bus; the
gateway listens there with its own credential (the 2026 path's machinery) and passes on, on the
GET stream, only what the caller may read. Sessions are bound to the principal, and end on
DELETE, at a reload that takes the subscription away, at a graceful stop; a client that goes
away releases the backend listens at once. Their bounds: test_legacy_session_bounds.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from typing import Any

import aiohttp
import pytest
import structlog
from mcp import types
from mcp.server.subscriptions import ResourceUpdated, ToolsListChanged
from mcp.shared.exceptions import MCPError
from prometheus_client import generate_latest

from gateway.errors import BAD_REQUEST_CODE, BackendFailure
from gateway.http.subscriptions import legacy_sessions
from gateway.wiring import production as wiring
from tests.support import sdk_stack as shared
from tests.support import wired
from tests.support.live_stack import LiveStack, MakeStack
from tests.support.mcp_client import legacy_initialize_body
from tests.support.policy import policy_text
from tests.support.sdk_stack import Heard, legacy_client, listeners, sdk_stack, sdk_stack_fixture
from tests.support.sdk_upstream import SdkUpstream
from tests.support.upstreams import ModernUpstream

# The SDK marks resources/subscribe deprecated (removed in 2026-07-28); these are 2025 clients.
pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")

POLICY = policy_text(
    tools={"echo": "tools:echo"},
    resources={"docs://guide/**": "docs:read", "docs://private/**": "docs:admin"},
)
NO_GUIDE = POLICY.replace('  "docs://guide/**": {scopes: [docs:read]}\n', "")
GUIDE = "docs://guide/intro"
KEYS = "docs://private/keys"
LIMITS = {"max_subscriptions_per_principal": 2, "max_subscribed_uris_per_principal": 3}
VERSION = "2025-11-25"
LEGACY = {"MCP-Protocol-Version": VERSION}


eventually = functools.partial(shared.eventually, within=10.0)
"""A session's listens open and close on the slower legacy path: this file waits up to 10 s."""


stack = sdk_stack_fixture(POLICY, {"limits": LIMITS})


async def initialize(live: LiveStack, token: str) -> tuple[dict[str, str], dict[str, Any]]:
    status, headers, text = await live.post(
        token,
        legacy_initialize_body(VERSION),
    )
    assert status == 200, text
    return headers, json.loads(text)["result"]


def subscribe(uri: str, rid: int = 1, method: str = "resources/subscribe") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {"uri": uri}}


async def test_subscribe_hear_the_update_unsubscribe(stack: tuple[LiveStack, SdkUpstream]) -> None:
    live, sdk = stack
    heard = Heard()
    http, client = legacy_client(live, live.token("mcp:access docs:read tools:echo"), heard)
    async with http, client:
        assert client.session.protocol_version == VERSION
        capabilities = client.session.server_capabilities
        assert capabilities is not None and capabilities.resources is not None
        assert capabilities.resources.subscribe is True
        # The GET stream attached: the gateway listens for the tools it lists.
        await eventually(lambda: listeners(sdk) == 1)
        await client.subscribe_resource(GUIDE)
        await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
        got = await heard.next()
        assert isinstance(got, types.ResourceUpdatedNotification)
        assert got.params.uri == GUIDE
        await sdk.bus.publish(ToolsListChanged())
        assert isinstance(await heard.next(), types.ToolListChangedNotification)
        await client.unsubscribe_resource(GUIDE)
        await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
        await heard.quiet()
    # The client closed (DELETE): the gateway's listens at the backend closed with it.
    await eventually(lambda: listeners(sdk) == 0)


async def test_initialize_mints_a_session_exactly_when_subscribing_would_work(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, _ = stack
    headers, result = await initialize(live, live.token("mcp:access docs:read"))
    assert headers["Mcp-Session-Id"]
    assert result["capabilities"]["resources"]["subscribe"] is True
    # Sees the echo tool (whose backend announces list changes) but no readable resource.
    headers, result = await initialize(live, live.token("mcp:access tools:echo"))
    assert headers["Mcp-Session-Id"]
    assert result["capabilities"]["tools"]["listChanged"] is True
    assert "resources" not in result["capabilities"]
    # Nothing to hear: no session, nothing advertised.
    headers, result = await initialize(live, live.token("mcp:access"))
    assert "Mcp-Session-Id" not in headers
    assert result["capabilities"]["tools"] == {"listChanged": False}


async def test_method_scopes_govern_the_legacy_path_too(make_stack: MakeStack) -> None:
    policy = POLICY + "methods:\n  subscriptions/listen: {scopes: [subs:listen]}\n"
    async with make_stack.of(sdk_stack, policy=policy) as (live, _sdk):
        headers, result = await initialize(live, live.token("mcp:access docs:read"))
        assert "Mcp-Session-Id" not in headers
        assert result["capabilities"]["resources"]["subscribe"] is False
        stepped = live.token("mcp:access docs:read subs:listen")
        headers, result = await initialize(live, stepped)
        assert result["capabilities"]["resources"]["subscribe"] is True
        sid = {"Mcp-Session-Id": headers["Mcp-Session-Id"], **LEGACY}
        status, headers, text = await live.post(
            live.token("mcp:access docs:read"), subscribe(GUIDE), sid
        )
        assert status == 403, text
        assert 'scope="mcp:access subs:listen"' in headers["WWW-Authenticate"]


@pytest.mark.row("legacy_resource_not_found")
async def test_a_uri_the_caller_may_not_read_is_refused_like_an_absent_one(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read tools:echo")
    headers, _ = await initialize(live, token)
    sid = {"Mcp-Session-Id": headers["Mcp-Session-Id"], **LEGACY}
    bodies = set()
    for uri in (KEYS, "other://nowhere/x"):  # step-up rule / no rule at all
        status, headers, text = await live.post(token, subscribe(uri, rid=4), sid)
        assert status == 200 and headers["Cache-Control"] == "no-store"
        bodies.add(text)
    assert len(bodies) == 1
    assert json.loads(bodies.pop())["error"] == {"code": -32002, "message": "Resource not found"}
    assert "resources/subscribe" not in sdk.methods  # decided at the gateway
    # And an update for it never reaches this caller's stream.
    heard = Heard()
    http, client = legacy_client(live, token, heard)
    async with http, client:
        await eventually(lambda: listeners(sdk) == 1)
        await client.subscribe_resource(GUIDE)
        with pytest.raises(MCPError) as refused:
            await client.subscribe_resource(KEYS)
        assert refused.value.error.code == -32002
        await sdk.bus.publish(ResourceUpdated(uri=KEYS))
        await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
        got = await heard.next()
        assert got.params.uri == GUIDE
        await heard.quiet()


@pytest.mark.row("session_not_found")
async def test_a_session_answers_only_its_own_principal(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, _ = stack
    ann = live.token("mcp:access docs:read", sub="ann")
    headers, _ = await initialize(live, ann)
    session = headers["Mcp-Session-Id"]
    assert (await live.post(ann, subscribe(GUIDE), {"Mcp-Session-Id": session, **LEGACY}))[0] == 200
    # Bob's token, Ann's session id: as unknown as an id never minted (or from another replica).
    bob = live.token("mcp:access docs:read", sub="bob")
    for sid in (session, session[:-2] + "AA", "not-a-session", "x" * 65):
        status, headers, text = await live.post(
            bob, subscribe(GUIDE), {"Mcp-Session-Id": sid, **LEGACY}
        )
        assert status == 404, text
        assert headers["Cache-Control"] == "no-store"
        assert json.loads(text)["error"] == {"code": -31404, "message": "Session not found"}
        async with live.session.get(
            live.server.mcp_url,
            headers={
                "Authorization": f"Bearer {bob}",
                "Accept": "text/event-stream",
                "Mcp-Session-Id": sid,
            },
        ) as response:
            assert response.status == 404
            assert (await response.json())["error"]["code"] == -31404
    # Another client id of the same subject is another principal too.
    other = live.token("mcp:access docs:read", sub="ann", client_id="other-app")
    status, _, _ = await live.post(other, subscribe(GUIDE), {"Mcp-Session-Id": session, **LEGACY})
    assert status == 404
    # DELETE ends it: Ann's own requests are 404 from then on.
    async with live.session.delete(
        live.server.mcp_url,
        headers={"Authorization": f"Bearer {ann}", "Mcp-Session-Id": session},
    ) as response:
        assert response.status == 204
    status, _, _ = await live.post(ann, subscribe(GUIDE), {"Mcp-Session-Id": session, **LEGACY})
    assert status == 404


@pytest.mark.row("session_required")
async def test_subscribe_without_a_session_is_400(stack: tuple[LiveStack, SdkUpstream]) -> None:
    live, _ = stack
    for method in ("resources/subscribe", "resources/unsubscribe"):
        status, headers, text = await live.post(
            live.token("mcp:access docs:read"), subscribe(GUIDE, method=method), LEGACY
        )
        assert status == 400, text
        assert headers["Cache-Control"] == "no-store"
        assert json.loads(text)["error"] == {
            "code": BAD_REQUEST_CODE,
            "message": "Mcp-Session-Id required",
        }


@pytest.mark.row("stream_not_acceptable")
async def test_a_get_that_does_not_accept_a_stream_is_406(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, _ = stack
    token = live.token("mcp:access docs:read")
    headers, _ = await initialize(live, token)
    for accept in ("application/json", "*/*", "text/event-stream;q=0"):
        async with live.session.get(
            live.server.mcp_url,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": accept,
                "Mcp-Session-Id": headers["Mcp-Session-Id"],
            },
        ) as response:
            assert response.status == 406
            assert response.headers["Cache-Control"] == "no-store"
            assert (await response.json())["error"] == "stream_not_acceptable"
    # A GET without a session is still the pre-authentication 405 (no OAuth dance for a probe).
    async with live.session.get(live.server.mcp_url) as response:
        assert response.status == 405 and response.headers["Allow"] == "POST"
    # A GET with a session but no token is authenticated like any request.
    async with live.session.get(
        live.server.mcp_url,
        headers={"Accept": "text/event-stream", "Mcp-Session-Id": headers["Mcp-Session-Id"]},
    ) as response:
        assert response.status == 401
        assert "resource_metadata=" in response.headers["WWW-Authenticate"]


async def test_a_client_that_goes_away_releases_the_backend_listens_then_the_session(
    stack: tuple[LiveStack, SdkUpstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    live, sdk = stack
    monkeypatch.setattr(legacy_sessions, "IDLE_S", 0.5)
    token = live.token("mcp:access docs:read")
    sids = []
    for _ in range(2):  # both of the principal's sessions
        sid = (await initialize(live, token))[0]["Mcp-Session-Id"]
        assert (await live.post(token, subscribe(GUIDE), {"Mcp-Session-Id": sid, **LEGACY}))[
            0
        ] == 200
        sids.append(sid)
    async with aiohttp.ClientSession() as raw:
        response = await raw.get(
            live.server.mcp_url,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "text/event-stream",
                "Mcp-Session-Id": sids[0],
            },
        )
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        assert response.headers["Mcp-Session-Id"] == sids[0]
        await eventually(lambda: listeners(sdk) == 1)
        response.close()  # the client goes away without a DELETE
    await eventually(lambda: listeners(sdk) == 0)
    # The sessions idle out: their slots are free again, their ids are 404 (a subscribe of the
    # URI already subscribed changes nothing while it is not).
    first = {"Mcp-Session-Id": sids[0], **LEGACY}
    for _ in range(100):
        status = (await live.post(token, subscribe(GUIDE), first))[0]
        if status != 200:
            break
        await asyncio.sleep(0.1)
    assert status == 404
    fresh = (await initialize(live, token))[0]["Mcp-Session-Id"]
    assert (await live.post(token, subscribe(GUIDE), {"Mcp-Session-Id": fresh, **LEGACY}))[0] == 200


async def test_a_reload_that_takes_the_resource_away_ends_that_subscription(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    heard = Heard()
    http, client = legacy_client(live, live.token("mcp:access docs:read tools:echo"), heard)
    async with http, client:
        await eventually(lambda: listeners(sdk) == 1)
        await client.subscribe_resource(GUIDE)
        (live.config_path.parent / "policy.yaml").write_text(NO_GUIDE)
        reload = live.server.services.reload_policy
        assert reload is not None
        await asyncio.to_thread(reload)
        await asyncio.sleep(1.0)  # past the hub's look at the new snapshot
        await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
        await sdk.bus.publish(ToolsListChanged())
        # The tools are still the caller's to hear about; the guide is not.
        assert isinstance(await heard.next(), types.ToolListChangedNotification)
        await heard.quiet()


async def test_a_reload_that_takes_the_method_away_ends_the_session(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read")
    sid = (await initialize(live, token))[0]["Mcp-Session-Id"]
    headers = {"Mcp-Session-Id": sid, **LEGACY}
    assert (await live.post(token, subscribe(GUIDE), headers))[0] == 200
    async with live.session.get(
        live.server.mcp_url,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "text/event-stream",
            "Mcp-Session-Id": sid,
        },
    ) as response:
        assert response.status == 200
        await eventually(lambda: listeners(sdk) == 1)
        stricter = POLICY + "methods:\n  subscriptions/listen: {scopes: [subs:listen]}\n"
        (live.config_path.parent / "policy.yaml").write_text(stricter)
        reload = live.server.services.reload_policy
        assert reload is not None
        await asyncio.to_thread(reload)
        async with asyncio.timeout(10):
            assert await response.content.read() == b""  # the stream ended
    await eventually(lambda: listeners(sdk) == 0)
    # The session ended: its id is 404 before any other check of the request (a step-up
    # would only lead the client back to it), with or without the scope.
    assert (await live.post(token, subscribe(GUIDE), headers))[0] == 404
    stepped = live.token("mcp:access docs:read subs:listen")  # the same principal
    assert (await live.post(stepped, subscribe(GUIDE), headers))[0] == 404


async def test_a_graceful_stop_ends_sessions_and_their_streams(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read")
    sid = (await initialize(live, token))[0]["Mcp-Session-Id"]
    async with live.session.get(
        live.server.mcp_url,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "text/event-stream",
            "Mcp-Session-Id": sid,
        },
    ) as response:
        assert response.status == 200
        await eventually(lambda: listeners(sdk) == 1)
        for hook in live.server.services.drain:
            hook(time.monotonic() + 5)
        async with asyncio.timeout(10):
            assert await response.content.read() == b""
    await eventually(lambda: listeners(sdk) == 0)
    status, _, _ = await live.post(token, subscribe(GUIDE), {"Mcp-Session-Id": sid, **LEGACY})
    assert status == 404


async def test_the_clients_token_reaches_no_backend_log_metric_or_body(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read tools:echo")
    heard = Heard()
    seen: list[str] = []
    with structlog.testing.capture_logs() as events:
        http, client = legacy_client(live, token, heard)
        async with http, client:
            await eventually(lambda: listeners(sdk) == 1)
            await client.subscribe_resource(GUIDE)
            await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
            seen.append(repr(await heard.next()))
            await client.unsubscribe_resource(GUIDE)
        for sid in ("bogus", None):
            extra = {"Mcp-Session-Id": sid, **LEGACY} if sid else LEGACY
            status, headers, text = await live.post(token, subscribe(GUIDE), extra)
            seen.append(f"{status} {headers!r} {text}")
    assert "subscriptions/listen" in sdk.methods
    assert sdk.authorizations and all(token not in value for value in sdk.authorizations)
    assert events
    for haystack in (repr(events), "\n".join(seen), generate_latest().decode()):
        assert token not in haystack
        assert token[8:40] not in haystack


@pytest.mark.row("session_terminated")
async def test_delete_ends_the_session_and_its_stream(stack: tuple[LiveStack, SdkUpstream]) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read")
    sid = (await initialize(live, token))[0]["Mcp-Session-Id"]
    auth = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": sid}
    assert (await live.post(token, subscribe(GUIDE), {"Mcp-Session-Id": sid, **LEGACY}))[0] == 200
    async with live.session.get(
        live.server.mcp_url, headers={**auth, "Accept": "text/event-stream"}
    ) as stream:
        assert stream.status == 200
        await eventually(lambda: listeners(sdk) == 1)
        async with live.session.delete(live.server.mcp_url, headers=auth) as response:
            assert response.status == 204
            assert response.headers["Cache-Control"] == "no-store"
            assert await response.read() == b""
        async with asyncio.timeout(10):
            assert await stream.content.read() == b""  # the stream ended with it
    await eventually(lambda: listeners(sdk) == 0)
    async with live.session.delete(live.server.mcp_url, headers=auth) as response:
        assert response.status == 404  # once
    # Without a session, DELETE stays the pre-authentication 405.
    async with live.session.delete(live.server.mcp_url) as response:
        assert response.status == 405


@pytest.mark.row("session_not_found")
async def test_every_request_naming_an_ended_session_is_404(
    stack: tuple[LiveStack, SdkUpstream], monkeypatch: pytest.MonkeyPatch
) -> None:
    """transports.mdx §Session Management 3: once the session is terminated the server MUST
    answer 404 to requests containing its id, not only to the session's own methods."""
    live, _ = stack
    token = live.token("mcp:access docs:read tools:echo")
    sid = (await initialize(live, token))[0]["Mcp-Session-Id"]
    session = {"Mcp-Session-Id": sid, **LEGACY}
    tools_list = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}
    status, _, text = await live.post(token, tools_list, session)  # live: ignored, served
    assert status == 200 and "tools" in json.loads(text)["result"], text
    async with live.session.delete(
        live.server.mcp_url, headers={"Authorization": f"Bearer {token}", **session}
    ) as response:
        assert response.status == 204
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    ping = {"jsonrpc": "2.0", "id": "p", "method": "ping"}
    for body, rid in ((tools_list, 5), (ping, "p"), (initialized, None)):
        status, headers, text = await live.post(token, body, session)
        assert status == 404, text
        assert headers["Cache-Control"] == "no-store"
        assert json.loads(text) == {
            "jsonrpc": "2.0",
            "id": rid,
            "error": {"code": -31404, "message": "Session not found"},
        }
    batch = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-03-26"}
    status, _, text = await live.post(token, [ping, tools_list], batch)
    assert status == 404 and json.loads(text)["error"]["code"] == -31404, text
    # A new session (initialize without the id) is served; so is a 2026-07-28 request, whose era
    # has no sessions, whatever it carries.
    assert (await initialize(live, token))[0]["Mcp-Session-Id"] != sid
    status, _, _ = await live.modern(token, "tools/list", headers={"Mcp-Session-Id": sid})
    assert status == 200
    # A session the gateway ended itself (no GET for IDLE_S) answers the same.
    monkeypatch.setattr(legacy_sessions, "IDLE_S", 0.2)
    idle = {"Mcp-Session-Id": (await initialize(live, token))[0]["Mcp-Session-Id"], **LEGACY}
    assert (await live.post(token, subscribe(GUIDE), idle))[0] == 200
    for _ in range(100):
        status, _, text = await live.post(token, tools_list, idle)
        if status != 200:
            break
        await asyncio.sleep(0.05)
    assert status == 404 and json.loads(text)["error"]["code"] == -31404, text


@pytest.mark.parametrize("off_by", ["worker", "config"])
async def test_a_worker_or_the_config_switch_offers_no_legacy_sessions(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch, off_by: str
) -> None:
    """``serve --workers N`` builds its workers' services with ``legacy_sessions=False`` (the
    kernel spreads a session's connections over processes), and ``protocol.legacy_subscriptions:
    false`` turns them off for replicas without affinity: nothing is advertised or minted."""
    overrides: dict[str, Any] = {}
    if off_by == "worker":
        monkeypatch.setattr(
            wired, "build_services", functools.partial(wiring.build_services, legacy_sessions=False)
        )
    else:
        overrides = {"protocol": {"legacy_subscriptions": False}}
    async with make_stack.of(sdk_stack, policy=POLICY, gateway=overrides) as (live, _sdk):
        token = live.token("mcp:access docs:read tools:echo")
        headers, result = await initialize(live, token)
        assert "Mcp-Session-Id" not in headers
        assert result["capabilities"]["resources"]["subscribe"] is False
        assert result["capabilities"]["tools"]["listChanged"] is False
        status, _, text = await live.post(token, subscribe(GUIDE), LEGACY)
        assert status == 200 and json.loads(text)["error"]["code"] == -32601
        async with live.session.get(
            live.server.mcp_url,
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "text/event-stream",
                "Mcp-Session-Id": "x.y",
            },
        ) as response:
            assert response.status == 405


async def read_event(response: aiohttp.ClientResponse, within: float = 10.0) -> dict[str, Any]:
    """The next ``message`` event's JSON on a raw SSE response (comments skipped)."""
    async with asyncio.timeout(within):
        data = b""
        while True:
            line = await response.content.readline()
            assert line, "the stream ended"
            if line.startswith(b"data: "):
                data = line[6:].strip()
            elif line == b"\n" and data:
                return json.loads(data)


def stream_headers(token: str, sid: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "text/event-stream",
        "Mcp-Session-Id": sid,
    }


async def test_the_stream_ends_with_the_token_and_a_fresh_token_resumes_the_session(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    short = live.token("mcp:access docs:read", ttl_s=2)
    sid = (await initialize(live, short))[0]["Mcp-Session-Id"]
    assert (await live.post(short, subscribe(GUIDE), {"Mcp-Session-Id": sid, **LEGACY}))[0] == 200
    started = time.monotonic()
    async with live.session.get(live.server.mcp_url, headers=stream_headers(short, sid)) as first:
        assert first.status == 200
        async with asyncio.timeout(12):
            assert await first.content.read() == b""  # ended at the token's expiry
    assert time.monotonic() - started < 10  # not the 900 s lifetime
    await eventually(lambda: listeners(sdk) == 0)
    # The same principal with a new token: the session and its subscription are still there.
    fresh = live.token("mcp:access docs:read")
    async with live.session.get(live.server.mcp_url, headers=stream_headers(fresh, sid)) as again:
        assert again.status == 200
        await eventually(lambda: listeners(sdk) == 1)
        await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
        assert await read_event(again) == {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": GUIDE},
        }


async def test_a_newer_get_of_the_session_replaces_the_older(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read")
    sid = (await initialize(live, token))[0]["Mcp-Session-Id"]
    assert (await live.post(token, subscribe(GUIDE), {"Mcp-Session-Id": sid, **LEGACY}))[0] == 200
    async with aiohttp.ClientSession() as other:
        old = await other.get(live.server.mcp_url, headers=stream_headers(token, sid))
        assert old.status == 200
        await eventually(lambda: listeners(sdk) == 1)
        async with live.session.get(live.server.mcp_url, headers=stream_headers(token, sid)) as new:
            assert new.status == 200
            with pytest.raises((aiohttp.ClientPayloadError, AssertionError)):
                async with asyncio.timeout(10):
                    assert await old.content.read() != b""  # ended (abruptly) or empty
            # The old stream's listen may still be registered upstream for a moment: publish
            # until the new stream hears it (an update is only a cue to read again).
            async with asyncio.timeout(10):
                while True:
                    await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
                    with contextlib.suppress(TimeoutError):
                        assert (await read_event(new, 0.3))["params"] == {"uri": GUIDE}
                        break
            await eventually(lambda: listeners(sdk) == 1)  # one stream's listens, not two
        old.close()


async def test_a_uri_the_backend_declines_or_cannot_take_is_not_kept(make_stack: MakeStack) -> None:
    """With the GET attached, a subscribe waits for the backend: one that acknowledges no URI
    answers like an absent resource (-32002), one that refuses the listen is a backend failure
    (-32603); neither URI stays counted."""
    upstream = ModernUpstream(
        subscribe=True,
        answers={
            "resources/list": {"resources": [{"uri": GUIDE, "name": "i"}]},
            "resources/templates/list": {"resourceTemplates": []},
        },
    )
    async with make_stack(
        upstream=upstream,
        policy=POLICY,
        gateway={"limits": {"max_subscribed_uris_per_principal": 1}},
    ) as live:
        token = live.token("mcp:access docs:read")
        headers, result = await initialize(live, token)
        assert result["capabilities"]["resources"]["subscribe"] is True
        sid = headers["Mcp-Session-Id"]
        session = {"Mcp-Session-Id": sid, **LEGACY}
        async with live.session.get(
            live.server.mcp_url, headers=stream_headers(token, sid)
        ) as stream:
            assert stream.status == 200
            status, headers, text = await live.post(token, subscribe(GUIDE, rid=3), session)
            assert status == 200 and headers["Cache-Control"] == "no-store"
            assert json.loads(text) == {
                "jsonrpc": "2.0",
                "id": 3,
                "error": {"code": -32002, "message": "Resource not found"},
            }
            assert len(upstream.calls("subscriptions/listen")) == 1  # it was asked
            upstream.fault = "listen_refused"
            other = "docs://guide/other"  # a new filter: a new listen, which the backend refuses
            status, _, text = await live.post(token, subscribe(other, rid=4), session)
            assert status == 200
            assert json.loads(text)["error"] == {"code": -32603, "message": BackendFailure.message}
            # Neither stayed counted: the URI bound (1) still has room.
            upstream.fault = None
            status, _, text = await live.post(token, subscribe(GUIDE, rid=5), session)
            assert status == 200
            assert json.loads(text)["error"]["code"] == -32002  # declined again, not 429
