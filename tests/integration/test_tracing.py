"""OpenTelemetry tracing (``tracing:``) of the production gateway, seen by a real OTLP receiver.

The stack is real (development issuer over HTTP, a recording 2026-07-28 upstream, the gateway as
``serve`` wires it); spans leave through the SDK's OTLP/HTTP exporter and are decoded from
protobuf by :class:`tests.support.otlp_receiver.OtlpReceiver`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.dev.dev_issuer import DevIssuer
from tests.support.exchange_stack import EXCHANGE_SECRET, exchange_stack
from tests.support.jwt_stack import jwt_stack
from tests.support.live_stack import (
    GATEWAY_SECRET,
    SERVICE,
    LiveStack,
    MakeStack,
    ServerFactory,
    live_stack,
)
from tests.support.otlp_receiver import ExportedSpan, GrpcOtlpReceiver, OtlpReceiver
from tests.support.ports import free_port

CLIENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
META_TRACE = "0af7651916cd43dd8448eb211c80319c"
META_SPAN = "b7ad6b7169203331"
OTLP_KEY = "otlp-api-key-value-9f2c"
SECRET_ARGUMENT = "argument-value-that-must-never-be-exported"


async def _stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    receiver: OtlpReceiver,
    **tracing: Any,
) -> Any:
    collector = await aiohttp_server(receiver.app(), host="127.0.0.1")
    monkeypatch.setenv("OTLP_KEY", OTLP_KEY)
    section = {
        "otlp": {
            "endpoint": f"http://127.0.0.1:{collector.port}",
            "headers": {"x-api-key": {"env": "OTLP_KEY"}},
            "timeout_s": tracing.pop("timeout_s", 5),
        },
        "service_name": "gw-under-test",
        **tracing,
    }
    return live_stack(tmp_path, aiohttp_server, monkeypatch, gateway={"tracing": section})


@pytest.fixture
async def traced(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[LiveStack, OtlpReceiver]]:
    receiver = OtlpReceiver()
    async with await _stack(tmp_path, aiohttp_server, monkeypatch, receiver) as stack:
        yield stack, receiver


def by_name(spans: list[ExportedSpan]) -> dict[str, ExportedSpan]:
    """Server and internal spans by name (the backend call shares the server span's name)."""
    return {span.name: span for span in spans if span.kind != "client"} | {
        span.name: span for span in spans if span.kind == "client" and span.name.startswith("mcp_")
    }


async def test_a_tool_call_is_one_server_span_with_its_steps_under_the_clients_trace(
    traced: tuple[LiveStack, OtlpReceiver],
) -> None:
    stack, receiver = traced
    token = stack.token()
    header = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    status, _, text = await stack.call(
        token, arguments={"text": "hello"}, rid="req-7", headers={"traceparent": header}
    )
    assert status == 200, text
    await receiver.wait_for(5)
    spans = by_name(receiver.trace(CLIENT_TRACE))
    server = spans["tools/call echo"]
    assert server.kind == "server"
    assert server.parent_id == CLIENT_SPAN
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.tool.name"] == "echo"
    assert server.attributes["gen_ai.operation.name"] == "execute_tool"
    assert server.attributes["mcp.protocol.version"] == "2026-07-28"
    assert server.attributes["jsonrpc.request.id"] == "req-7"
    assert server.attributes["network.transport"] == "tcp"
    assert server.attributes["http.response.status_code"] == 200
    assert server.attributes["mcp_gateway.decision"] == "allow"
    assert server.attributes["mcp_gateway.outcome"] == "ok"
    assert "error.type" not in server.attributes
    assert not server.error
    assert server.resource["service.name"] == "gw-under-test"

    check = spans["mcp_gateway.token_check"]
    assert check.parent_id == server.span_id
    assert check.attributes["mcp_gateway.token_cache"] == "miss"
    introspection = spans["mcp_gateway.introspection"]
    assert (introspection.kind, introspection.parent_id) == ("client", check.span_id)
    assert introspection.attributes["server.address"] == "127.0.0.1"
    assert introspection.attributes["http.response.status_code"] == 200
    policy = spans["mcp_gateway.policy"]
    assert (policy.parent_id, policy.attributes["mcp_gateway.decision"]) == (
        server.span_id,
        "allow",
    )
    backend = [
        s for s in receiver.trace(CLIENT_TRACE) if s.kind == "client" and s is not introspection
    ]
    assert len(backend) == 1
    call = backend[0]
    assert call.name == "tools/call echo"
    assert call.parent_id == server.span_id
    assert call.attributes["server.address"] == "127.0.0.1"
    assert call.attributes["http.response.status_code"] == 200
    assert call.attributes["mcp_gateway.backend"] == "default"
    for child in (check, introspection, policy, call):
        assert server.start_ns <= child.start_ns <= child.end_ns <= server.end_ns

    # The backend's parent is the backend call's span, in the header and (SEP-414) in _meta.
    sent = stack.upstream.calls("tools/call")[-1]
    expected = f"00-{CLIENT_TRACE}-{call.span_id}-01"
    assert sent.headers["traceparent"] == expected
    assert sent.json["params"]["_meta"]["traceparent"] == expected

    # The same token again: a cache hit, no introspection span.
    status, _, _ = await stack.call(token, headers={"traceparent": header})
    assert status == 200
    await receiver.wait_for(5 + 4)
    second = [s for s in receiver.trace(CLIENT_TRACE) if s.start_ns > server.end_ns]
    names = sorted(s.name for s in second)
    assert names == sorted(
        ["tools/call echo", "tools/call echo", "mcp_gateway.token_check", "mcp_gateway.policy"]
    )
    hit = next(s for s in second if s.name == "mcp_gateway.token_check")
    assert hit.attributes["mcp_gateway.token_cache"] == "hit"


async def test_the_meta_trace_context_is_the_parent_and_the_backend_gets_the_gateways(
    traced: tuple[LiveStack, OtlpReceiver],
) -> None:
    stack, receiver = traced
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "traceparent": f"00-{META_TRACE}-{META_SPAN}-01",
        "tracestate": "rojo=00f067aa0ba902b7",
    }
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": meta},
    }
    headers = {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "echo",
        "traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01",
    }
    status, _, text = await stack.post(stack.token(), body, headers)
    assert status == 200, text
    await receiver.wait_for(5)
    server = next(s for s in receiver.spans if s.kind == "server")
    assert (server.trace_id, server.parent_id) == (META_TRACE, META_SPAN)
    assert server.links == ((CLIENT_TRACE, CLIENT_SPAN),)  # the HTTP context, linked
    call = next(
        s for s in receiver.trace(META_TRACE) if s.name == "tools/call echo" and s.kind == "client"
    )
    sent = stack.upstream.calls("tools/call")[-1]
    mine = f"00-{META_TRACE}-{call.span_id}-01"
    assert sent.json["params"]["_meta"]["traceparent"] == mine  # not the client's value
    assert sent.json["params"]["_meta"]["tracestate"] == "rojo=00f067aa0ba902b7"
    assert sent.headers["traceparent"] == mine


async def test_a_rejection_is_an_error_span(traced: tuple[LiveStack, OtlpReceiver]) -> None:
    stack, receiver = traced
    status, _, _ = await stack.call(
        "not-a-token", headers={"traceparent": f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"}
    )
    assert status == 401
    await receiver.wait_for(2)
    server = next(s for s in receiver.spans if s.kind == "server")
    assert server.error
    assert server.attributes["error.type"] == "-31401"
    assert server.attributes["mcp_gateway.error_row"] == "invalid_token"
    check = next(s for s in receiver.spans if s.name == "mcp_gateway.token_check")
    assert check.error and check.attributes["error.type"] == "invalid_token"


async def test_nothing_secret_is_in_any_exported_byte(
    traced: tuple[LiveStack, OtlpReceiver],
) -> None:
    stack, receiver = traced
    token = stack.token()
    status, _, text = await stack.call(token, arguments={"text": SECRET_ARGUMENT})
    assert status == 200 and SECRET_ARGUMENT in text  # the result carries it back
    await stack.call("refused-" + token)  # a refused token
    await stack.modern(token, "tools/list")
    await receiver.wait_for(10)
    exported = b"".join(receiver.raw)
    for secret in (token, token.split(".")[-1], GATEWAY_SECRET, SERVICE, OTLP_KEY, SECRET_ARGUMENT):
        assert secret.encode() not in exported, secret
    # The collector's API key went where it belongs: the export request's header.
    assert receiver.headers[0].get("x-api-key") == OTLP_KEY


async def test_exemplars_name_the_trace_on_the_duration_histogram(
    traced: tuple[LiveStack, OtlpReceiver],
) -> None:
    stack, _ = traced
    header = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
    assert (await stack.call(stack.token(), headers={"traceparent": header}))[0] == 200
    accept = {"Accept": "application/openmetrics-text; version=1.0.0"}
    async with stack.session.get(stack.server.ops_url + "/metrics", headers=accept) as response:
        text = await response.text()
    lines = [
        ln for ln in text.splitlines() if "request_duration_seconds_bucket" in ln and "#" in ln
    ]
    assert any(f'trace_id="{CLIENT_TRACE}"' in line for line in lines), lines[:5]


async def dropped_spans(stack: LiveStack, reason: str) -> float:
    """``mcp_gateway_trace_spans_dropped_total{reason}`` as the ops listener shows it now."""
    async with stack.session.get(stack.server.ops_url + "/metrics") as response:
        text = await response.text()
    sample = f'mcp_gateway_trace_spans_dropped_total{{reason="{reason}"}} '
    return float(next(ln for ln in text.splitlines() if ln.startswith(sample)).split()[-1])


async def test_a_hanging_collector_drops_spans_and_never_blocks_a_request(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = OtlpReceiver(hang=True)
    context = await _stack(
        tmp_path, aiohttp_server, monkeypatch, receiver, timeout_s=30, max_queue_spans=8
    )
    async with context as stack:
        token = stack.token()
        assert (await stack.call(token))[0] == 200  # warm: introspected, cached
        took = []
        for _ in range(20):
            started = time.monotonic()
            status, _, _ = await stack.call(token)
            took.append(time.monotonic() - started)
            assert status == 200
        assert max(took) < 2.0, took  # nobody waits for the 30 s export
        for _ in range(50):  # the first batch is stuck in the hanging export
            if receiver.raw:
                break
            await asyncio.sleep(0.1)
        assert len(receiver.raw) == 1
        assert await dropped_spans(stack, "queue_full") > 0
        # Shutdown must not wait for the hung export past its bound either.
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 40


async def test_sample_ratio_zero_records_only_what_the_caller_sampled(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = OtlpReceiver()
    context = await _stack(tmp_path, aiohttp_server, monkeypatch, receiver, sample_ratio=0)
    async with context as stack:
        token = stack.token()
        assert (await stack.call(token))[0] == 200  # a trace the gateway starts: not sampled
        sent = stack.upstream.calls("tools/call")[-1]
        assert sent.headers["traceparent"].endswith("-00")  # told downstream: not recorded
        header = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
        assert (await stack.call(token, headers={"traceparent": header}))[0] == 200
        await receiver.wait_for(3)
        await asyncio.sleep(1.5)
        assert {s.trace_id for s in receiver.spans} == {CLIENT_TRACE}
        unsampled = f"00-{META_TRACE}-{META_SPAN}-00"
        assert (await stack.call(token, headers={"traceparent": unsampled}))[0] == 200
        await asyncio.sleep(1.5)
        assert {s.trace_id for s in receiver.spans} == {CLIENT_TRACE}


async def test_the_grpc_protocol_exports_to_a_grpc_collector(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = GrpcOtlpReceiver()
    await receiver.start()
    monkeypatch.setenv("OTLP_KEY", OTLP_KEY)
    section = {
        "otlp": {
            "endpoint": f"http://127.0.0.1:{receiver.port}",
            "protocol": "grpc",
            "headers": {"x-api-key": {"env": "OTLP_KEY"}},
            "timeout_s": 5,
        }
    }
    try:
        async with make_stack(gateway={"tracing": section}) as stack:
            assert (await stack.call(stack.token()))[0] == 200
            for _ in range(100):
                if "mcp_gateway.token_check" in receiver.span_names():
                    break
                await asyncio.sleep(0.05)
        assert receiver.span_names().count("tools/call echo") == 2  # SERVER and CLIENT
        assert receiver.metadata[0].get("x-api-key") == OTLP_KEY
    finally:
        await receiver.stop()


async def test_a_token_exchange_is_a_client_span_of_the_request(
    aiohttp_server: ServerFactory, make_stack: MakeStack
) -> None:
    receiver = OtlpReceiver()
    collector = await aiohttp_server(receiver.app(), host="127.0.0.1")
    tracing = {"otlp": {"endpoint": f"http://127.0.0.1:{collector.port}", "timeout_s": 5}}
    async with make_stack.of(exchange_stack, gateway={"tracing": tracing}) as (stack, upstream):
        token = stack.token()
        status, _, text = await stack.call(token)
        assert status == 200, text
        spans = await receiver.wait_for(6)
        exchanged = upstream.calls("tools/call")[-1].headers["Authorization"].split()[-1]
    server = next(s for s in spans if s.kind == "server")
    exchange = next(s for s in spans if s.name == "mcp_gateway.token_exchange")
    assert exchange.kind == "client"
    assert exchange.trace_id == server.trace_id
    assert exchange.attributes["http.response.status_code"] == 200
    assert exchange.attributes["server.address"] == "127.0.0.1"
    exported = b"".join(receiver.raw)
    assert token.encode() not in exported
    assert EXCHANGE_SECRET.encode() not in exported
    assert exchanged.encode() not in exported


async def test_an_unreachable_collector_costs_spans_not_requests_and_one_log_line(
    make_stack: MakeStack,
    capsys: pytest.CaptureFixture[str],
) -> None:
    closed = free_port()  # nothing listens there
    section = {"otlp": {"endpoint": f"http://127.0.0.1:{closed}", "timeout_s": 1}}
    async with make_stack(gateway={"tracing": section}) as stack:
        token = stack.token()
        for _ in range(3):  # three export rounds (one a second), each refused
            started = time.monotonic()
            assert (await stack.call(token))[0] == 200
            assert time.monotonic() - started < 2.0
            await asyncio.sleep(1.3)
        failed = await dropped_spans(stack, "export_failed")
    assert failed >= 2 * 4  # at least two requests' spans
    assert capsys.readouterr().out.count("tracing.export_failed") == 1  # once a minute at most


async def test_a_jwks_fetch_is_a_span_only_when_the_request_makes_it(
    aiohttp_server: ServerFactory, make_stack: MakeStack
) -> None:
    receiver = OtlpReceiver()
    collector = await aiohttp_server(receiver.app(), host="127.0.0.1")
    dev = DevIssuer(token_format="jwt", introspection=False)
    tracing = {"otlp": {"endpoint": f"http://127.0.0.1:{collector.port}", "timeout_s": 5}}
    async with make_stack.of(
        jwt_stack,
        dev=dev,
        issuer={"jwks_unknown_kid_interval_s": 1},
        gateway={"tracing": tracing},
    ) as stack:
        first = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
        assert (await stack.call(stack.token(sub="a"), headers={"traceparent": first}))[0] == 200
        dev.keys.use(dev.keys.add("EC"))  # a key the gateway has not fetched yet
        second = f"00-{META_TRACE}-{META_SPAN}-01"
        assert (await stack.call(stack.token(sub="b"), headers={"traceparent": second}))[0] == 200
        await receiver.wait_for(4 + 5)
    assert "mcp_gateway.jwks_fetch" not in {s.name for s in receiver.trace(CLIENT_TRACE)}
    spans = by_name(receiver.trace(META_TRACE))
    fetch = spans["mcp_gateway.jwks_fetch"]
    assert fetch.kind == "client"
    assert fetch.parent_id == spans["mcp_gateway.token_check"].span_id
    assert fetch.attributes["http.response.status_code"] == 200
    assert spans["mcp_gateway.token_check"].attributes["mcp_gateway.token_cache"] == "miss"
