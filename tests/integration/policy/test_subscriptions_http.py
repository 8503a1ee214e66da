"""``subscriptions/listen`` through the gateway (2026-07-28), the official SDK on both sides.

The SDK's ``Client.listen`` opens the stream at the gateway; behind it the SDK's ``MCPServer``
publishes changes on its subscription bus. The gateway opens its own listen there (with its
service credential), passes on only what the caller may know about, ends the stream when the
client goes away, at a reload that takes access away and at a graceful stop, and bounds the
streams per principal and per replica.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import structlog
from mcp.server.subscriptions import PromptsListChanged, ResourceUpdated, ToolsListChanged
from prometheus_client import generate_latest

from gateway.errors import RATE_LIMITED_CODE
from tests.support.live_stack import MODERN, LiveStack, MakeStack, modern_meta
from tests.support.mcp_client import legacy_initialize_body
from tests.support.policy import policy_text
from tests.support.sdk_stack import (
    eventually,
    listeners,
    next_event,
    quiet,
    sdk_client,
    sdk_stack,
    sdk_stack_fixture,
)
from tests.support.sdk_upstream import SdkUpstream

POLICY = policy_text(
    tools={"echo": "tools:echo"},
    prompts={"greet": ""},
    resources={"docs://guide/**": "docs:read", "docs://private/**": "docs:admin"},
)
NO_GUIDE = POLICY.replace('  "docs://guide/**": {scopes: [docs:read]}\n', "")
GUIDE = "docs://guide/intro"
KEYS = "docs://private/keys"
LIMITS = {"max_subscriptions_per_principal": 2, "max_subscribed_uris_per_principal": 3}


stack = sdk_stack_fixture(POLICY, {"limits": LIMITS})


def listen_body(rid: int = 1, **notifications: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "subscriptions/listen",
        "params": {"_meta": modern_meta(), "notifications": notifications},
    }


HEADERS = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"}


async def test_caller_a_is_told_and_caller_b_is_not(stack: tuple[LiveStack, SdkUpstream]) -> None:
    live, sdk = stack
    http_a, a = sdk_client(live, live.token("mcp:access docs:read tools:echo", sub="ann"))
    http_b, b = sdk_client(live, live.token("mcp:access", sub="bob"))
    async with (
        http_a,
        a,
        http_b,
        b,
        a.listen(
            tools_list_changed=True, prompts_list_changed=True, resource_subscriptions=[GUIDE, KEYS]
        ) as sub_a,
        b.listen(
            tools_list_changed=True, prompts_list_changed=True, resource_subscriptions=[GUIDE, KEYS]
        ) as sub_b,
    ):
        # A may read the guide (not the keys) and sees echo; B sees only the prompt.
        assert sub_a.honored.resource_subscriptions == [GUIDE]
        assert sub_a.honored.tools_list_changed is True
        assert sub_b.honored.resource_subscriptions is None
        assert sub_b.honored.tools_list_changed is None
        assert sub_b.honored.prompts_list_changed is True
        await eventually(lambda: listeners(sdk) == 2)
        await sdk.bus.publish(ResourceUpdated(uri=KEYS))
        await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
        await sdk.bus.publish(ToolsListChanged())
        await sdk.bus.publish(PromptsListChanged())
        got_a = [type(await next_event(sub_a)).__name__ for _ in range(3)]
        assert got_a == ["ResourceUpdated", "ToolsListChanged", "PromptsListChanged"]
        assert type(await next_event(sub_b)).__name__ == "PromptsListChanged"
        await quiet(sub_a)
        await quiet(sub_b)
    # The client went away: the gateway's streams at the backend were closed with it.
    await eventually(lambda: listeners(sdk) == 0)


async def test_discover_advertises_what_listen_would_grant(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, _ = stack
    for scopes, subscribe, tools in (
        ("mcp:access docs:read tools:echo", True, True),
        ("mcp:access", False, False),
    ):
        status, _, text = await live.modern(live.token(scopes), "server/discover")
        assert status == 200, text
        capabilities = json.loads(text)["result"]["capabilities"]
        assert capabilities.get("resources", {}).get("subscribe", False) is subscribe
        assert capabilities.get("tools", {}).get("listChanged", False) is tools
        assert capabilities["prompts"]["listChanged"] is True  # both see greet
    # The legacy era advertises the same, with a session whose GET stream carries it
    # (tests/integration/policy/test_legacy_subscriptions_http.py).
    status, headers, text = await live.post(
        live.token("mcp:access docs:read"),
        legacy_initialize_body("2025-11-25"),
    )
    assert json.loads(text)["result"]["capabilities"]["resources"]["subscribe"] is True
    assert headers["Mcp-Session-Id"]


@pytest.mark.row("too_many_subscriptions")
async def test_streams_and_uris_per_principal_at_and_past_the_bound(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read")
    http, client = sdk_client(live, token)
    async with http, client:
        # Past the URI bound in one request (4 > 3): refused before anything opens.
        status, headers, text = await live.post(
            token,
            listen_body(resourceSubscriptions=[f"docs://guide/p{i}" for i in range(4)]),
            HEADERS,
        )
        assert status == 429, text
        assert "Retry-After" not in headers and headers["Cache-Control"] == "no-store"
        assert json.loads(text)["error"] == {
            "code": RATE_LIMITED_CODE,
            "message": "Too many subscriptions",
        }
        async with (
            client.listen(resource_subscriptions=[GUIDE, "docs://guide/a"]),
            client.listen(resource_subscriptions=["docs://guide/b"]),  # at both bounds
        ):
            status, headers, text = await live.post(
                token, listen_body(resourceSubscriptions=[]), HEADERS
            )
            assert status == 429, text  # a third stream
            assert json.loads(text)["error"]["code"] == RATE_LIMITED_CODE
        # Closed streams give their slots back (once the gateway saw them go).
        await eventually(lambda: listeners(sdk) == 0)
        await asyncio.sleep(0.2)
        async with client.listen(resource_subscriptions=[GUIDE, "docs://guide/a", "x://y"]):
            pass


@pytest.mark.row("over_capacity")
async def test_streams_per_replica_at_and_past_the_bound(make_stack: MakeStack) -> None:
    async with make_stack.of(
        sdk_stack,
        policy=POLICY,
        gateway={"limits": {"max_subscriptions": 2}},
    ) as (live, sdk):
        clients = [sdk_client(live, live.token("mcp:access docs:read", sub=s)) for s in "abc"]
        async with (
            clients[0][0],
            clients[0][1],
            clients[1][0],
            clients[1][1],
            clients[2][0],
            clients[2][1],
        ):
            async with (
                clients[0][1].listen(resource_subscriptions=[GUIDE]),
                clients[1][1].listen(resource_subscriptions=[GUIDE]),
            ):
                status, headers, text = await live.post(
                    live.token("mcp:access docs:read", sub="c"),
                    listen_body(resourceSubscriptions=[GUIDE]),
                    HEADERS,
                )
                assert status == 503, text
                assert headers["Retry-After"] == "1"
                assert json.loads(text)["error"] == "over_capacity"
                # Held streams hold no in-flight slot: tools/call still runs.
                status, _, text = await live.call(
                    live.token("mcp:access tools:echo"), arguments={"text": "hi"}
                )
                assert status == 200, text
            # Both closed: once the gateway saw them go, their replica slots are free again.
            await eventually(lambda: listeners(sdk) == 0)
            await asyncio.sleep(0.2)
            async with clients[2][1].listen(resource_subscriptions=[GUIDE]) as third:
                assert third.honored.resource_subscriptions == [GUIDE]


async def test_a_reload_that_takes_the_resource_away_ends_the_stream(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    http, client = sdk_client(live, live.token("mcp:access docs:read"))
    async with http, client, client.listen(resource_subscriptions=[GUIDE]) as sub:
        (live.config_path.parent / "policy.yaml").write_text(NO_GUIDE)
        reload = live.server.services.reload_policy
        assert reload is not None
        await asyncio.to_thread(reload)  # what SIGHUP does (the file poll may be first)
        await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
        # The graceful end (the listen result): the iteration stops, no event first.
        with pytest.raises(StopAsyncIteration):
            await next_event(sub)
    await eventually(lambda: listeners(sdk) == 0)


async def test_a_reload_that_keeps_access_keeps_the_stream(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    http, client = sdk_client(live, live.token("mcp:access docs:read"))
    async with http, client, client.listen(resource_subscriptions=[GUIDE]) as sub:
        more = POLICY + '  "docs://extra/**": {scopes: []}\n'
        (live.config_path.parent / "policy.yaml").write_text(more)
        reload = live.server.services.reload_policy
        assert reload is not None
        await asyncio.to_thread(reload)
        await asyncio.sleep(1.0)  # past the hub's look at the new snapshot
        await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
        assert type(await next_event(sub)).__name__ == "ResourceUpdated"


async def test_a_graceful_stop_ends_streams_with_the_listen_result(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    http, client = sdk_client(live, live.token("mcp:access docs:read"))
    async with http, client, client.listen(resource_subscriptions=[GUIDE]) as sub:
        for hook in live.server.services.drain:
            hook(time.monotonic() + 5)
        with pytest.raises(StopAsyncIteration):
            await next_event(sub)
        status, headers, _ = await live.post(
            live.token("mcp:access docs:read", sub="late"),
            listen_body(resourceSubscriptions=[GUIDE]),
            HEADERS,
        )
        assert status == 503 and headers["Retry-After"] == "1"
    await eventually(lambda: listeners(sdk) == 0)


async def test_bad_filters_are_invalid_params(stack: tuple[LiveStack, SdkUpstream]) -> None:
    live, _ = stack
    token = live.token("mcp:access docs:read")
    for notifications in (
        {"toolsListChanged": "yes"},
        {"resourceSubscriptions": "docs://x"},
        {"resourceSubscriptions": [1]},
    ):
        status, _, text = await live.post(token, listen_body(**notifications), HEADERS)
        assert status == 400, text
        assert json.loads(text)["error"]["code"] == -32602


async def test_the_clients_token_reaches_no_backend_log_metric_or_body(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read tools:echo")
    http, client = sdk_client(live, token)
    seen: list[str] = []
    with structlog.testing.capture_logs() as events:
        async with http, client:
            async with client.listen(
                tools_list_changed=True, resource_subscriptions=[GUIDE]
            ) as sub:
                await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
                seen.append(repr(await next_event(sub)))
            status, headers, text = await live.post(
                token, listen_body(rid=9, toolsListChanged=1), HEADERS
            )
            seen.append(f"{status} {headers!r} {text}")
    assert "subscriptions/listen" in sdk.methods
    assert sdk.authorizations and all(token not in value for value in sdk.authorizations)
    assert events
    for haystack in (repr(events), "\n".join(seen), generate_latest().decode()):
        assert token not in haystack
        assert token[8:40] not in haystack


async def test_method_scopes_step_up_and_hide_the_capability(make_stack: MakeStack) -> None:
    policy = POLICY + "methods:\n  subscriptions/listen: {scopes: [subs:listen]}\n"
    async with make_stack.of(sdk_stack, policy=policy) as (live, _sdk):
        token = live.token("mcp:access docs:read")
        status, _, text = await live.modern(token, "server/discover")
        assert json.loads(text)["result"]["capabilities"]["resources"]["subscribe"] is False
        status, headers, text = await live.post(
            token, listen_body(resourceSubscriptions=[GUIDE]), HEADERS
        )
        assert status == 403, text
        assert 'scope="mcp:access subs:listen"' in headers["WWW-Authenticate"]
        assert json.loads(text)["error"]["data"]["missing_scopes"] == ["subs:listen"]
        stepped = live.token("mcp:access docs:read subs:listen")
        status, _, text = await live.modern(stepped, "server/discover")
        assert json.loads(text)["result"]["capabilities"]["resources"]["subscribe"] is True


async def test_capabilities_and_listens_survive_a_link_that_is_detecting_again(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    # After an upstream failure (a connection error, a -32601 to a surface request) the link
    # forgets the backend's era until the next request detects it again. Meanwhile discover
    # kept advertising subscribe (the last detected offer), and a listen detects instead of
    # being refused: the capability no longer flickers with the backend's last error.
    live, sdk = stack
    token = live.token("mcp:access docs:read tools:echo", sub="ann")
    backend = live.server.services.backend
    (member,) = backend.members  # type: ignore[union-attr]
    member._link.forget()  # the state such a failure leaves
    status, _, text = await live.modern(token, "server/discover")
    assert status == 200, text
    assert json.loads(text)["result"]["capabilities"]["resources"]["subscribe"] is True
    member._link.forget()
    http, client = sdk_client(live, token)
    async with http, client, client.listen(resource_subscriptions=[GUIDE]) as sub:
        assert sub.honored.resource_subscriptions == [GUIDE]
        await eventually(lambda: listeners(sdk) == 1)
        await sdk.bus.publish(ResourceUpdated(uri=GUIDE))
        assert type(await next_event(sub)).__name__ == "ResourceUpdated"
