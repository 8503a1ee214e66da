"""The catalog follows the upstream: bounded polling and ``notifications/tools/list_changed``.

* ``backend.catalog_refresh_s`` is the polling interval; an advertised ``ttlMs`` may only shorten
  it, never below 10 s (the official SDK's server advertises ``ttlMs: 0``).
* A ``notifications/tools/list_changed`` triggers a coalesced refresh, wherever the upstream's
  era delivers it: a ``subscriptions/listen`` stream (2026-07-28), the session's GET stream or a
  reply stream (2025 revisions).

Real components: the official ``mcp`` SDK server as one upstream, the recording upstreams of
``tests/support/upstreams.py`` as others, the development issuer, the production wiring; every
listing is read through the gateway's HTTP surface.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.backend.catalog import refresher
from gateway.backend.catalog.refresher import TTL_FLOOR_S, refresh_interval
from gateway.backend.federation import FederatedBackend
from gateway.backend.upstream_backend import UpstreamBackend
from tests.support.live_stack import LiveStack, MakeStack, ServerFactory, live_stack
from tests.support.sdk_upstream import SdkUpstream, sdk_upstream
from tests.support.upstreams import LegacyUpstream, ModernUpstream, echo_tool

OPEN_POLICY = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  '*': {scopes: []}\n"
SLOW_POLLING = {"backend": {"catalog_refresh_s": 300}}
"""Polling far slower than any wait below: a change seen in time came from a notification."""


def backend_of(stack: LiveStack) -> UpstreamBackend:
    """The one upstream of a ``backend:`` section (a federation of one, named ``default``)."""
    federation = stack.server.services.backend
    assert isinstance(federation, FederatedBackend)
    backend = federation.member("default")
    assert isinstance(backend, UpstreamBackend)
    return backend


async def listed(stack: LiveStack) -> set[str]:
    status, _, text = await stack.modern(stack.token("mcp:access tools:echo"), "tools/list")
    assert status == 200, text
    return {tool["name"] for tool in json.loads(text)["result"]["tools"]}


async def eventually(condition: Callable[[], Any], timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not await condition():  # noqa: ASYNC110 - polls the HTTP surface
            await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("configured", "ttl_ms", "expected"),
    [
        (300.0, None, 300.0),  # no ttlMs: the configured interval
        (300.0, 0, TTL_FLOOR_S),  # ttlMs 0 is not a busy loop
        (300.0, 9_999, TTL_FLOOR_S),  # just under the floor
        (300.0, 10_000, 10.0),  # at the floor
        (300.0, 60_000, 60.0),  # ttlMs shortens the interval
        (120.0, 600_000, 120.0),  # ...but never lengthens it
        (5.0, 0, 5.0),  # a configured interval under the floor is the operator's choice
    ],
)
def test_refresh_interval_rule(configured: float, ttl_ms: int | None, expected: float) -> None:
    assert refresh_interval(configured, ttl_ms) == expected


@contextlib.asynccontextmanager
async def _sdk_gateway(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[SdkUpstream, LiveStack]]:
    """The gateway polling slowly in front of the official SDK's server."""
    async with (
        sdk_upstream() as sdk,
        live_stack(
            tmp_path,
            aiohttp_server,
            monkeypatch,
            backend_url=sdk.url,
            policy=OPEN_POLICY,
            gateway=SLOW_POLLING,
        ) as stack,
    ):
        yield sdk, stack


async def test_ttl_ms_0_from_the_sdk_server_does_not_relist_every_second(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _sdk_gateway(tmp_path, aiohttp_server, monkeypatch) as (sdk, stack):
        assert await listed(stack) == {"echo"}
        assert backend_of(stack).refresh_interval == TTL_FLOOR_S
        # The subscription's acknowledgment asks for one re-fetch; after that, silence.
        await eventually(lambda: _true(backend_of(stack)._listener.acknowledged >= 1))
        settled = sdk.count("tools/list")
        await asyncio.sleep(2.5)  # on main, ttlMs 0 meant a tools/list every second
        assert sdk.count("tools/list") - settled <= 1


async def test_ttl_ms_0_from_a_recording_upstream_polls_at_the_floor(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = ModernUpstream()
    upstream.ttl_ms = 0
    waits: list[float] = []  # what the refresh loop sleeps between fetches, as it asks
    wait = refresher.sleep_or_wake

    async def recorded(wake: asyncio.Event, seconds: float) -> None:
        waits.append(seconds)
        await wait(wake, seconds)

    monkeypatch.setattr(refresher, "sleep_or_wake", recorded)
    async with make_stack(upstream=upstream, gateway=SLOW_POLLING) as stack:
        assert backend_of(stack).refresh_interval == TTL_FLOOR_S
        await eventually(lambda: _true(bool(waits)))
        # ttlMs 0 meant a busy loop: the loop now sleeps the floor before fetching again.
        assert set(waits) == {TTL_FLOOR_S}
    assert len(upstream.calls("tools/list")) == 1


async def test_the_sdk_servers_list_changed_on_subscriptions_listen_refreshes_the_catalog(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _sdk_gateway(tmp_path, aiohttp_server, monkeypatch) as (sdk, stack):
        assert await listed(stack) == {"echo"}
        await eventually(lambda: _true(backend_of(stack)._listener.acknowledged >= 1))

        def added(text: str) -> str:
            return text

        sdk.server.add_tool(added, name="added")
        await sdk.announce()
        await eventually(lambda: _has(stack, "added"))
        assert sdk.count("subscriptions/listen") == 1


async def test_a_burst_of_notifications_is_coalesced(make_stack: MakeStack) -> None:
    upstream = ModernUpstream(list_changed=True)
    upstream.ttl_ms = None
    async with make_stack(
        upstream=upstream,
        policy=OPEN_POLICY,
        gateway=SLOW_POLLING,
    ) as stack:
        listener = backend_of(stack)._listener
        await eventually(lambda: _true(listener.acknowledged >= 1))
        await eventually(lambda: _true(len(upstream.calls("tools/list")) >= 2))  # after the ack
        before = len(upstream.calls("tools/list"))
        upstream.tools = [echo_tool("echo"), echo_tool("fresh")]
        for _ in range(20):
            upstream.announce()
        await eventually(lambda: _has(stack, "fresh"))
        await asyncio.sleep(1.5)  # room for any refresh the burst would still cause
        assert 1 <= len(upstream.calls("tools/list")) - before <= 2


async def test_a_legacy_upstreams_get_stream_notification_refreshes_the_catalog(
    make_stack: MakeStack,
) -> None:
    upstream = LegacyUpstream(list_changed=True)
    async with make_stack(
        upstream=upstream,
        policy=OPEN_POLICY,
        gateway=SLOW_POLLING,
    ) as stack:
        assert await listed(stack) == {"echo"}
        await eventually(lambda: _true(upstream.streams_opened >= 1))
        gets = [r for r in upstream.requests if r.method == "GET"]
        assert gets[0].headers["Mcp-Session-Id"] in upstream.sessions
        assert gets[0].headers["Accept"] == "text/event-stream"
        assert gets[0].headers["Authorization"] == "Bearer service-secret"
        upstream.tools = [echo_tool("echo"), echo_tool("late")]
        upstream.announce()
        await eventually(lambda: _has(stack, "late"))


async def test_a_list_changed_inside_a_legacy_tool_reply_refreshes_the_catalog(
    make_stack: MakeStack,
) -> None:
    upstream = LegacyUpstream(list_changed=True)
    async with make_stack(
        upstream=upstream,
        policy=OPEN_POLICY,
        gateway=SLOW_POLLING,
    ) as stack:
        upstream.tools = [echo_tool("echo"), echo_tool("from_reply")]
        status, _, text = await stack.call(stack.token("mcp:access"), arguments={"text": "changed"})
        assert status == 200, text
        await eventually(lambda: _has(stack, "from_reply"))


@pytest.mark.parametrize("kind", ["modern", "legacy"])
async def test_no_change_stream_is_opened_without_list_changed_advertised(
    make_stack: MakeStack, kind: str
) -> None:
    upstream = ModernUpstream() if kind == "modern" else LegacyUpstream()
    async with make_stack(upstream=upstream) as stack:
        await listed(stack)
        await asyncio.sleep(1.5)  # the listener looks at the link state once a second
    assert upstream.calls("subscriptions/listen") == []
    assert [r for r in upstream.requests if r.method == "GET"] == []


async def test_an_upstream_refusing_to_listen_is_not_asked_again(make_stack: MakeStack) -> None:
    upstream = ModernUpstream(list_changed=True, fault="listen_refused")
    async with make_stack(upstream=upstream) as stack:
        await eventually(lambda: _true(len(upstream.calls("subscriptions/listen")) >= 1))
        await asyncio.sleep(2.5)  # a retry loop would have asked again by now
        assert len(upstream.calls("subscriptions/listen")) == 1
        assert await listed(stack) == {"echo"}


async def _true(value: bool) -> bool:
    return value


async def _has(stack: LiveStack, name: str) -> bool:
    return name in await listed(stack)
