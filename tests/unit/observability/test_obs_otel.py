"""The OpenTelemetry export (gateway/observability/otel.py): bounded queue, failure log throttle,
attributes, and no SDK on a gateway without ``tracing:``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence

import structlog
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway.config import OtlpConfig, TracingConfig
from gateway.observability import spans
from gateway.observability.metrics import Metrics
from gateway.observability.otel import Tracing
from gateway.observability.tracing import trace_context
from gateway.seams import RequestContext

SAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Failing(SpanExporter):
    def __init__(self) -> None:
        self.batches = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches += 1
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        return


def tracing(exporter: SpanExporter, metrics: Metrics, **kw: object) -> Tracing:
    config = TracingConfig(otlp=OtlpConfig(endpoint="http://127.0.0.1:9"), **kw)  # type: ignore[arg-type]
    return Tracing(config, metrics=metrics, exporter=exporter)


def one_request(t: Tracing, *, method: str | None = "tools/call", tool: str = "echo") -> None:
    trace = trace_context(SAMPLED, None)
    recorded = t.begin(trace)
    assert recorded is not None
    spans.enter(recorded)
    with spans.child("mcp_gateway.token_check"):
        spans.annotate("mcp_gateway.token_cache", "hit")
    ctx = RequestContext(
        request_id="r1",
        trace_id=trace.trace_id,
        span_id=trace.span_id,
        started=0.0,
        client_ip="192.0.2.1",
    )
    ctx.method, ctx.tool, ctx.status = method, tool, 200
    t.finish(recorded, ctx)
    spans.enter(None)


def value(metrics: Metrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def test_a_full_queue_drops_and_counts_never_waits() -> None:
    metrics = Metrics()
    exporter = InMemorySpanExporter()
    t = tracing(exporter, metrics, max_queue_spans=4)
    for _ in range(3):  # 2 spans each: the third does not fit
        one_request(t)
    assert value(metrics, "mcp_gateway_trace_spans_dropped_total", reason="queue_full") == 2
    t._export_queued()
    assert len(exporter.get_finished_spans()) == 4
    assert value(metrics, "mcp_gateway_trace_spans_exported_total") == 4


def test_failed_exports_are_counted_and_logged_once_per_interval() -> None:
    metrics = Metrics()
    exporter = Failing()
    t = tracing(exporter, metrics)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            one_request(t)
            t._export_queued()
    assert exporter.batches == 3
    assert [e["event"] for e in logs if e["event"] == "tracing.export_failed"] == [
        "tracing.export_failed"
    ]
    assert value(metrics, "mcp_gateway_trace_spans_dropped_total", reason="export_failed") == 6


def test_the_server_span_follows_the_mcp_conventions() -> None:
    exporter = InMemorySpanExporter()
    t = tracing(exporter, Metrics())
    one_request(t)
    one_request(t, method="x/" + "a" * 200)  # the client's text: bounded
    t._export_queued()
    server, other = (s for s in exporter.get_finished_spans() if s.kind.name == "SERVER")
    assert server.name == "tools/call echo"
    assert server.attributes is not None and other.attributes is not None
    assert server.attributes["mcp.method.name"] == "tools/call"
    assert server.attributes["gen_ai.tool.name"] == "echo"
    assert server.parent is not None and f"{server.parent.span_id:016x}" == "00f067aa0ba902b7"
    assert other.name == "mcp"
    assert other.attributes["mcp.method.name"] == "_OTHER"
    check = next(s for s in exporter.get_finished_spans() if s.name == "mcp_gateway.token_check")
    assert check.attributes == {"mcp_gateway.token_cache": "hit"}
    assert check.parent is not None and check.parent.span_id == server.context.span_id


def test_an_unsampled_parent_records_nothing() -> None:
    t = tracing(InMemorySpanExporter(), Metrics())
    assert t.begin(trace_context(SAMPLED[:-2] + "00", None)) is None
    assert spans.child("anything") is spans.NO_SPAN


def test_a_gateway_without_tracing_never_imports_the_export() -> None:
    # redis-py imports parts of the OpenTelemetry API when installed (its own observability);
    # the gateway's export module, the SDK's tracer and the OTLP exporters stay unloaded.
    code = (
        "import sys, gateway.commands.cli, gateway.wiring.production;"
        "import gateway.http.pipeline.endpoint;"
        "import gateway.backend.upstream_backend;"
        "print(sorted(m for m in sys.modules if m.startswith(("
        "'gateway.observability.otel', 'opentelemetry.sdk.trace', 'opentelemetry.exporter'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
