"""UpstreamBackend against a real 2025-06-18 upstream (sessions, SSE replies) on loopback."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from gateway.seams import ToolCall
from tests.integration.backend.helpers import context, make_config, principal
from tests.support.upstreams import echo_tool


def call_of(backend: Any, name: str, arguments: dict[str, Any], **extra: Any) -> ToolCall:
    tool = backend.catalog().get(name)
    assert tool is not None
    return ToolCall(
        tool=tool, arguments=arguments, era="legacy", protocol_version="2025-06-18", **extra
    )


async def test_a_legacy_upstream_is_detected_after_discover_fails(legacy, backend_factory) -> None:
    upstream, url = legacy
    backend = await backend_factory(make_config(url))
    assert backend.ready
    state = backend.link.state
    assert (state.era, state.version) == ("legacy", "2025-06-18")
    assert state.session_id in upstream.sessions
    methods = [r.json.get("method") for r in upstream.requests]
    assert methods[:4] == [
        "server/discover",
        "initialize",
        "notifications/initialized",
        "tools/list",
    ]
    # The upstream counter-offered 2025-06-18 to our 2025-11-25 (lifecycle.mdx): accepted.
    offered = [r.json["params"]["protocolVersion"] for r in upstream.calls("initialize")]
    assert offered == ["2025-11-25"]
    assert "MCP-Protocol-Version" not in upstream.calls("initialize")[0].headers
    listed = upstream.calls("tools/list")[0]
    assert listed.headers["Mcp-Session-Id"] == state.session_id
    assert listed.headers["MCP-Protocol-Version"] == "2025-06-18"
    assert "Mcp-Method" not in listed.headers
    assert [t.name for t in backend.catalog()] == ["echo"]


async def test_initialize_walks_down_the_version_ladder_when_refused(
    legacy, backend_factory
) -> None:
    upstream, url = legacy
    upstream.strict_versions = ("2025-03-26",)
    backend = await backend_factory(make_config(url))
    offered = [r.json["params"]["protocolVersion"] for r in upstream.calls("initialize")]
    assert offered == ["2025-11-25", "2025-06-18", "2025-03-26"]
    assert backend.link.state.version == "2025-03-26"
    # 2025-03-26 predates the MCP-Protocol-Version header.
    assert "MCP-Protocol-Version" not in upstream.calls("tools/list")[0].headers


async def test_a_legacy_call_uses_the_shared_session_and_no_modern_meta(
    legacy, backend_factory
) -> None:
    upstream, url = legacy
    backend = await backend_factory(make_config(url))
    for _ in range(3):
        result = await backend.call_tool(
            call_of(backend, "echo", {"text": "x"}), principal(), context(), time.monotonic() + 5
        )
        assert result["isError"] is False
    assert len(upstream.calls("initialize")) == 1  # once at startup, no per-call setup
    calls = upstream.calls("tools/call")
    assert len({c.headers["Mcp-Session-Id"] for c in calls}) == 1
    assert all("_meta" not in c.json["params"] for c in calls)
    assert all(c.headers["Authorization"] == "Bearer service-secret" for c in calls)


async def test_an_expired_session_is_reinitialized_transparently(legacy, backend_factory) -> None:
    upstream, url = legacy
    backend = await backend_factory(make_config(url))
    old = backend.link.state.session_id
    upstream.expire_sessions()
    result = await backend.call_tool(
        call_of(backend, "echo", {"text": "again"}), principal(), context(), time.monotonic() + 5
    )
    assert result["isError"] is False
    new = backend.link.state.session_id
    assert new != old and new in upstream.sessions
    calls = upstream.calls("tools/call")
    assert [c.headers["Mcp-Session-Id"] for c in calls] == [old, new]


async def test_close_deletes_the_upstream_session(legacy, backend_factory) -> None:
    upstream, url = legacy
    backend = await backend_factory(make_config(url))
    sid = backend.link.state.session_id
    await backend.close()
    assert upstream.deleted == [sid]
    delete = next(r for r in upstream.requests if r.method == "DELETE")
    assert delete.headers["Authorization"] == "Bearer service-secret"


async def test_progress_notifications_are_relayed_with_the_clients_token(
    legacy, backend_factory
) -> None:
    upstream, url = legacy
    backend = await backend_factory(make_config(url))
    seen: list[Mapping[str, Any]] = []

    async def on_progress(params: Mapping[str, Any]) -> None:
        seen.append(params)

    result = await backend.call_tool(
        call_of(
            backend,
            "echo",
            {"steps": 3},
            progress_token="client-tok",
            accepts_sse=True,
            on_progress=on_progress,
        ),
        principal(),
        context(),
        time.monotonic() + 5,
    )
    assert result["isError"] is False
    assert [p["progress"] for p in seen] == [1, 2, 3]
    assert all(p["progressToken"] == "client-tok" for p in seen)
    sent = upstream.calls("tools/call")[-1].json["params"]["_meta"]["progressToken"]
    assert sent != "client-tok"  # the upstream sees the gateway's own token


async def test_progress_is_dropped_when_the_client_did_not_ask(legacy, backend_factory) -> None:
    upstream, url = legacy
    backend = await backend_factory(make_config(url))
    result = await backend.call_tool(
        call_of(backend, "echo", {"steps": 3}), principal(), context(), time.monotonic() + 5
    )
    assert result["isError"] is False
    assert "_meta" not in upstream.calls("tools/call")[-1].json["params"]


async def test_a_garbled_event_stream_maps_to_the_failure_text(legacy, backend_factory) -> None:
    upstream, url = legacy
    backend = await backend_factory(make_config(url))
    upstream.fault = "garbled_sse"
    ctx = context()
    result = await backend.call_tool(
        call_of(backend, "echo", {}), principal(), ctx, time.monotonic() + 5
    )
    assert result == {
        "content": [{"type": "text", "text": "Upstream tool failed"}],
        "isError": True,
    }
    assert ctx.outcome == "upstream_error"


async def test_an_upstream_that_is_down_at_start_becomes_ready_later(
    aiohttp_server, backend_factory
) -> None:
    from tests.support.ports import free_port
    from tests.support.upstreams import LegacyUpstream

    port = free_port()  # bound later: below the ephemeral range, this worker's own
    url = f"http://127.0.0.1:{port}/mcp"
    backend = await backend_factory(make_config(url, catalog_refresh_s=1.0))
    assert not backend.ready and len(backend.catalog()) == 0
    upstream = LegacyUpstream(tools=[echo_tool("late")])
    await aiohttp_server(upstream.app(), port=port)
    for _ in range(500):
        if backend.ready:
            break
        await asyncio.sleep(0.01)
    assert backend.ready
    assert [t.name for t in backend.catalog()] == ["late"]


async def test_an_sse_event_over_the_reply_cap_maps_to_too_large(legacy, backend_factory) -> None:
    from gateway.config import Limits

    _, url = legacy
    backend = await backend_factory(make_config(url, limits=Limits(max_response_bytes=1024)))
    ctx = context()
    result = await backend.call_tool(
        call_of(backend, "echo", {"text": "y" * 2000}), principal(), ctx, time.monotonic() + 5
    )
    assert result["content"][0]["text"] == "Upstream reply too large"
    assert ctx.outcome == "too_large"


async def test_a_refused_credential_is_not_mistaken_for_a_legacy_upstream(
    legacy, backend_factory
) -> None:
    upstream, url = legacy
    upstream.accepted = set()
    backend = await backend_factory(make_config(url))
    assert not backend.ready
    assert upstream.calls("initialize") == []


async def test_a_stream_without_our_response_maps_to_the_failure_text(
    legacy, backend_factory
) -> None:
    upstream, url = legacy
    backend = await backend_factory(make_config(url))
    upstream.fault = "wrong_id_sse"
    result = await backend.call_tool(
        call_of(backend, "echo", {}), principal(), context(), time.monotonic() + 5
    )
    assert result["content"][0]["text"] == "Upstream tool failed"
