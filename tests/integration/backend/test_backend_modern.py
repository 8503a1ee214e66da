"""UpstreamBackend against a real 2026-07-28 upstream on loopback (JSON replies)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from gateway.backend.upstream.rpc import backend_destination
from gateway.backend.upstream.tool_results import INVALID_ARGUMENTS_TEXT
from gateway.config import Limits
from gateway.outbound.client import Outbound
from gateway.seams import ToolCall
from tests.integration.backend.helpers import context, make_config, principal
from tests.support.upstreams import ModernUpstream, echo_tool

ALLOWED_HEADERS = {
    "host",
    "accept",
    "accept-encoding",
    "content-type",
    "content-length",
    "user-agent",
    "authorization",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "x-request-id",
    "traceparent",
    "tracestate",
    "x-mcp-gateway-subject",
    "x-mcp-gateway-client-id",
}


def call_of(backend: Any, name: str, arguments: dict[str, Any], **extra: Any) -> ToolCall:
    tool = backend.catalog().get(name)
    assert tool is not None
    return ToolCall(
        tool=tool, arguments=arguments, era="modern", protocol_version="2026-07-28", **extra
    )


async def test_a_modern_upstream_is_detected_with_server_discover(modern, backend_factory) -> None:
    upstream, url = modern
    backend = await backend_factory(make_config(url))
    assert backend.ready
    assert backend.link.state.era == "modern"
    discover = upstream.calls("server/discover")
    assert len(discover) == 1
    meta = discover[0].json["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {}
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcp-resource-gateway"
    assert discover[0].headers["Mcp-Method"] == "server/discover"
    assert not upstream.calls("initialize")


async def test_every_tools_list_page_is_fetched_and_the_catalog_is_sorted(
    modern, backend_factory
) -> None:
    upstream, url = modern
    upstream.tools = [echo_tool(n) for n in ("e", "d", "c", "b", "a")]
    backend = await backend_factory(make_config(url))
    assert [t.name for t in backend.catalog()] == ["a", "b", "c", "d", "e"]
    cursors = [r.json["params"].get("cursor") for r in upstream.calls("tools/list")]
    assert cursors == [None, "2", "4"]


async def test_invalid_tools_are_dropped_and_the_rest_served(modern, backend_factory) -> None:
    upstream, url = modern
    upstream.tools = [
        echo_tool("good"),
        {"name": "bad name", "inputSchema": {"type": "object"}},
        {"name": "no_schema"},
        echo_tool("hdr", properties={"r": {"type": "number", "x-mcp-header": "R"}}),
    ]
    backend = await backend_factory(make_config(url))
    assert [t.name for t in backend.catalog()] == ["good"]


async def test_the_catalog_refreshes_on_its_interval_and_a_failed_refresh_keeps_the_last_good(
    modern, backend_factory
) -> None:
    upstream, url = modern
    upstream.ttl_ms = 1000
    # A configured interval below the ttlMs floor is the operator's choice and is kept.
    backend = await backend_factory(make_config(url, catalog_refresh_s=1.0))
    assert backend.refresh_interval == 1.0
    first = backend.catalog()
    upstream.tools = [echo_tool("echo"), echo_tool("second")]
    for _ in range(300):
        if backend.catalog() is not first:
            break
        await asyncio.sleep(0.01)
    assert [t.name for t in backend.catalog()] == ["echo", "second"]
    good = backend.catalog()
    upstream.fault = "list_fails"
    assert await backend.refresh() is False
    assert backend.catalog() is good
    assert backend.ready
    failures = backend._metrics.catalog.refresh_total.labels(backend="default", result="failure")
    assert failures._value.get() >= 1


async def test_the_name_prefix_is_advertised_and_stripped_upstream(modern, backend_factory) -> None:
    upstream, url = modern
    backend = await backend_factory(make_config(url, name_prefix="acme."))
    assert [t.name for t in backend.catalog()] == ["acme.echo"]
    result = await backend.call_tool(
        call_of(backend, "acme.echo", {"text": "hi"}), principal(), context(), time.monotonic() + 5
    )
    assert result["isError"] is False
    sent = upstream.calls("tools/call")[-1]
    assert sent.json["params"]["name"] == "echo"
    assert sent.headers["Mcp-Name"] == "echo"


async def test_a_tool_call_reaches_the_upstream_as_a_canonical_gateway_built_request(
    modern, backend_factory
) -> None:
    upstream, url = modern
    upstream.tools = [
        echo_tool(
            "echo",
            properties={
                "text": {"type": "string"},
                "region": {"type": "string", "x-mcp-header": "Region"},
            },
        )
    ]
    backend = await backend_factory(make_config(url, identity_headers=True))
    ctx = context("req-42")
    call = call_of(
        backend,
        "echo",
        {"text": "héllo", "region": "eu west"},
        traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        tracestate="vendor=1",
        header_params={"Region": "ignored client bytes"},
    )
    result = await backend.call_tool(call, principal(), ctx, time.monotonic() + 5)
    assert result["content"][0]["text"] == json.dumps(
        {"region": "eu west", "text": "héllo"}, sort_keys=True
    )
    sent = upstream.calls("tools/call")[-1]
    body = sent.json
    assert (
        sent.body
        == json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()
    )
    assert body["params"]["name"] == "echo"
    assert isinstance(body["id"], int)
    meta = body["params"]["_meta"]
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert "progressToken" not in meta
    headers = sent.headers
    assert {k.lower() for k in headers if not k.lower().startswith("mcp-param-")} <= ALLOWED_HEADERS
    assert headers["Authorization"] == "Bearer service-secret"
    assert headers["MCP-Protocol-Version"] == "2026-07-28"
    assert headers["Mcp-Method"] == "tools/call"
    assert headers["Mcp-Param-Region"] == "eu west"
    assert headers["X-Request-Id"] == "req-42"
    assert headers["traceparent"].startswith("00-0af7")
    assert headers["tracestate"] == "vendor=1"
    assert headers["X-MCP-Gateway-Subject"] == "alice@example.com"
    assert headers["X-MCP-Gateway-Client-Id"] == "claude-code"
    assert ctx.outcome == "ok" and ctx.backend_ms is not None


async def test_every_request_to_the_upstream_carries_only_the_service_credential(
    modern, backend_factory
) -> None:
    upstream, url = modern
    backend = await backend_factory(make_config(url))
    await backend.call_tool(
        call_of(backend, "echo", {}), principal(), context(), time.monotonic() + 5
    )
    assert upstream.requests
    for recorded in upstream.requests:
        assert recorded.headers.getall("Authorization") == ["Bearer service-secret"]
        assert "Cookie" not in recorded.headers
        assert {k.lower() for k in recorded.headers} <= ALLOWED_HEADERS


async def test_result_fidelity_keeps_content_and_drops_gateway_owned_keys(
    modern, backend_factory
) -> None:
    _, url = modern
    backend = await backend_factory(make_config(url))
    result = await backend.call_tool(
        call_of(backend, "echo", {"text": "fail"}), principal(), context(), time.monotonic() + 5
    )
    assert set(result) == {"content", "structuredContent", "isError", "_meta"}
    assert result["isError"] is True
    assert result["structuredContent"] == {"echo": {"text": "fail"}}
    assert result["_meta"] == {"com.example/trace": "kept"}


async def test_invalid_arguments_become_an_error_result_without_an_upstream_call(
    modern, backend_factory
) -> None:
    upstream, url = modern
    backend = await backend_factory(make_config(url))
    ctx = context()
    result = await backend.call_tool(
        call_of(backend, "echo", {"text": 5}), principal(), ctx, time.monotonic() + 5
    )
    assert result == {
        "content": [{"type": "text", "text": INVALID_ARGUMENTS_TEXT}],
        "isError": True,
    }
    assert "5" not in INVALID_ARGUMENTS_TEXT
    assert upstream.calls("tools/call") == []
    assert ctx.outcome == "invalid_arguments"


@pytest.mark.parametrize(
    ("fault", "text", "outcome"),
    [
        ("500", "Upstream tool failed", "upstream_error"),
        ("oversized", "Upstream reply too large", "too_large"),
        ("garbled_json", "Upstream tool failed", "upstream_error"),
        ("lone_surrogate", "Upstream tool failed", "upstream_error"),
        ("overflow", "Upstream tool failed", "upstream_error"),
        ("wrong_id", "Upstream tool failed", "upstream_error"),
        ("redirect", "Upstream tool failed", "upstream_error"),
        ("bad_result", "Upstream tool failed", "upstream_error"),
        ("rpc_error", "Upstream tool failed", "upstream_error"),
        ("unknown_tool", "Upstream rejected the tool call", "upstream_error"),
    ],
)
async def test_upstream_faults_map_to_a_fixed_error_result(
    modern, backend_factory, fault: str, text: str, outcome: str
) -> None:
    upstream, url = modern
    backend = await backend_factory(make_config(url))
    upstream.fault = fault
    ctx = context()
    result = await backend.call_tool(
        call_of(backend, "echo", {}), principal(), ctx, time.monotonic() + 5
    )
    assert result == {"content": [{"type": "text", "text": text}], "isError": True}
    assert ctx.outcome == outcome
    counter = backend._metrics.backend_requests_total.labels(
        backend="default", tool="echo", outcome=outcome
    )
    assert counter._value.get() == 1


async def test_a_slow_upstream_times_out_at_the_request_deadline(modern, backend_factory) -> None:
    upstream, url = modern
    backend = await backend_factory(make_config(url))
    upstream.fault = "slow"
    ctx = context()
    result = await backend.call_tool(
        call_of(backend, "echo", {}), principal(), ctx, time.monotonic() + 0.3
    )
    assert result["content"][0]["text"] == "Upstream tool timed out"
    assert ctx.outcome == "timeout"
    await asyncio.wait_for(upstream.disconnected.wait(), 5)


async def test_the_per_tool_timeout_caps_the_deadline(modern, backend_factory) -> None:
    upstream, url = modern
    backend = await backend_factory(make_config(url, tool_timeouts_s=(("echo", 0.2),)))
    upstream.fault = "slow"
    result = await backend.call_tool(
        call_of(backend, "echo", {}), principal(), context(), time.monotonic() + 30
    )
    assert result["content"][0]["text"] == "Upstream tool timed out"


async def test_a_cancelled_call_aborts_the_upstream_request(modern, backend_factory) -> None:
    upstream, url = modern
    backend = await backend_factory(make_config(url))
    upstream.fault = "slow"
    ctx = context()
    task = asyncio.create_task(
        backend.call_tool(call_of(backend, "echo", {}), principal(), ctx, time.monotonic() + 30)
    )
    await asyncio.wait_for(upstream.slow_started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.wait_for(upstream.disconnected.wait(), 5)
    assert ctx.outcome == "cancelled"


async def test_an_unknown_tool_answer_triggers_a_catalog_refresh(modern, backend_factory) -> None:
    upstream, url = modern
    backend = await backend_factory(make_config(url))
    before = len(upstream.calls("tools/list"))
    upstream.fault = "unknown_tool"
    await backend.call_tool(
        call_of(backend, "echo", {}), principal(), context(), time.monotonic() + 5
    )
    for _ in range(200):
        if len(upstream.calls("tools/list")) > before:
            break
        await asyncio.sleep(0.01)
    assert len(upstream.calls("tools/list")) > before


async def test_oversize_is_measured_at_the_limit_and_one_past(
    modern, backend_factory, outbound
) -> None:
    upstream, url = modern
    probe = await backend_factory(make_config(url))
    await probe.call_tool(
        call_of(probe, "echo", {"text": "x"}), principal(), context(), time.monotonic() + 5
    )
    # The reply to {"text": "x"} has a fixed size; allow exactly that, then one byte less.
    reply = await _reply_size(outbound, url, upstream)
    at = await backend_factory(make_config(url, limits=Limits(max_response_bytes=reply)))
    result = await at.call_tool(
        call_of(at, "echo", {"text": "x"}), principal(), context(), time.monotonic() + 5
    )
    assert result["isError"] is False
    past = await backend_factory(
        make_config(url, limits=Limits(max_response_bytes=reply - 1)), start=False
    )
    past._refresher._catalog = at.catalog()
    result = await past.call_tool(
        call_of(past, "echo", {"text": "x"}), principal(), context(), time.monotonic() + 5
    )
    assert result["content"][0]["text"] == "Upstream reply too large"


async def _reply_size(outbound: Outbound, url: str, upstream: ModernUpstream) -> int:
    sent = upstream.calls("tools/call")[-1]
    skip = {"host", "content-length", "user-agent"}
    headers = {k: v for k, v in sent.headers.items() if k.lower() not in skip}
    response = await outbound.request(
        backend_destination("default"), "POST", url, timeout_s=5, headers=headers, body=sent.body
    )
    return len(response.body)


async def test_arguments_cannot_change_the_tool_name_the_upstream_sees(
    modern, backend_factory
) -> None:
    upstream, url = modern
    upstream.tools = [echo_tool("echo"), echo_tool("admin_delete")]
    backend = await backend_factory(make_config(url))
    tricky = {"text": "x", "name": "admin_delete", "params": {"name": "admin_delete"}}
    await backend.call_tool(
        call_of(backend, "echo", tricky), principal(), context(), time.monotonic() + 5
    )
    sent = upstream.calls("tools/call")[-1]
    assert sent.json["params"]["name"] == "echo"
    assert sent.headers["Mcp-Name"] == "echo"
    assert sent.body.count(b'"name":"echo"') == 1
    assert sent.body.startswith(b'{"id":') and b'"method":"tools/call"' in sent.body


async def test_the_era_is_detected_again_after_a_connection_failure(
    aiohttp_server, backend_factory
) -> None:
    upstream = ModernUpstream()
    server = await aiohttp_server(upstream.app())
    url = str(server.make_url("/mcp"))
    backend = await backend_factory(make_config(url))
    port = server.port
    await server.close()
    result = await backend.call_tool(
        call_of(backend, "echo", {}), principal(), context(), time.monotonic() + 5
    )
    assert result["content"][0]["text"] == "Upstream tool failed"
    assert backend.link.state is None
    revived = ModernUpstream()
    await aiohttp_server(revived.app(), port=port)
    result = await backend.call_tool(
        call_of(backend, "echo", {}), principal(), context(), time.monotonic() + 5
    )
    assert result["isError"] is False
    assert [r.json["method"] for r in revived.requests] == ["server/discover", "tools/call"]


async def test_no_log_line_carries_the_service_token_or_upstream_text(
    modern, backend_factory
) -> None:
    import structlog

    upstream, url = modern
    with structlog.testing.capture_logs() as logs:
        backend = await backend_factory(make_config(url))
        for fault in ("500", "rpc_error", "garbled_json", "unknown_tool"):
            upstream.fault = fault
            await backend.call_tool(
                call_of(backend, "echo", {"text": "private argument"}),
                principal(),
                context(),
                time.monotonic() + 5,
            )
    text = repr(logs)
    for secret in (
        "service-secret",
        "hunter2",
        "secret-internal-name",
        "private argument",
        "Traceback",
    ):
        assert secret not in text
    assert any(entry["event"] == "backend_call_failed" for entry in logs)


async def test_tools_list_follows_at_most_64_pages(modern, backend_factory) -> None:
    upstream, url = modern
    upstream.page_size = 1
    upstream.tools = [echo_tool(f"t{i:02d}") for i in range(64)]
    backend = await backend_factory(make_config(url))
    assert len(backend.catalog()) == 64
    upstream.tools = [echo_tool(f"t{i:02d}") for i in range(65)]
    assert await backend.refresh() is False
    assert len(backend.catalog()) == 64


async def test_a_cursor_loop_fails_the_fetch(modern, backend_factory) -> None:
    upstream, url = modern
    upstream.tools = [echo_tool(n) for n in ("a", "b", "c")]
    upstream.fault = "cursor_loop"
    backend = await backend_factory(make_config(url))
    assert not backend.ready
    assert len(upstream.calls("tools/list")) == 2
