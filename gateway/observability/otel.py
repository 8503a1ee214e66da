"""OpenTelemetry export of the requests' spans (``tracing:``; the ``otel`` extra).

Imported only when ``tracing:`` is configured (:mod:`gateway.wiring`), so a gateway without it
never loads the SDK. :class:`Tracing` is the endpoint's hook:

- :meth:`Tracing.begin` (request start) decides sampling as the SDK's ``parentbased_traceidratio``
  sampler does: a caller's ``traceparent`` decides by its sampled flag, a trace the gateway
  starts by :class:`~opentelemetry.sdk.trace.sampling.TraceIdRatioBased` (``sample_ratio``). A
  sampled request gets a :class:`~gateway.observability.spans.RequestTrace` that the layers fill.
- :meth:`Tracing.finish` (request end) names and annotates the server span from the request's
  record and queues the trace: one ``deque.append``, nothing else on the request's path. A full
  queue (``max_queue_spans``) drops the trace, counted in
  ``mcp_gateway_trace_spans_dropped_total{reason="queue_full"}``; a request never waits.
- One export thread turns queued traces into SDK :class:`~opentelemetry.sdk.trace.ReadableSpan`
  objects (with the gateway's own span ids, so ``traceparent`` and log lines name the exported
  spans) and hands them to the SDK's OTLP exporter (``http/protobuf`` or ``grpc``) in batches,
  each bounded by ``otlp.timeout_s``. A failed export drops its batch
  (``reason="export_failed"``) and is logged at most once per :data:`FAILURE_LOG_INTERVAL_S`
  with the count since the last line; the exporter's own per-batch log lines are silenced.

The server span follows the OpenTelemetry semantic conventions for MCP (semantic-conventions-genai
docs/gen-ai/mcp.md, status Development, as of 2026-10): span name ``{mcp.method.name} {target}``
(the tool name for ``tools/call``), kind SERVER, ``mcp.method.name``, ``gen_ai.tool.name`` and
``gen_ai.operation.name=execute_tool`` for a tool call, ``mcp.protocol.version``,
``jsonrpc.request.id`` (not for a notification), ``rpc.response.status_code`` and ``error.type``
(the JSON-RPC error code as a string, ``tool_error`` for an ``isError`` result, else the row or
outcome), span status ERROR exactly when ``error.type`` is set, ``network.transport=tcp``,
``client.address``. The backend call is a CLIENT span with ``server.address``/``server.port``.
Never an argument value, a result, a token or a secret: docs/operations.md#tracing lists every
attribute.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Final
from urllib.parse import urlsplit

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from gateway import __version__
from gateway.config import OtlpConfig, TracingConfig
from gateway.observability.logging import get_logger
from gateway.observability.metric_labels import METHOD_LABELS
from gateway.observability.metrics import Metrics
from gateway.observability.spans import AttributeValue, RequestTrace, SpanRecord
from gateway.observability.tracing import FLAG_SAMPLED, TraceContext
from gateway.seams import RequestContext

__all__ = ["FAILURE_LOG_INTERVAL_S", "Tracing", "build_exporter"]

FAILURE_LOG_INTERVAL_S: Final = 60.0
BATCH_SPANS: Final = 512
"""Spans per export request (the SDK's BatchSpanProcessor default)."""
EXPORT_DELAY_S: Final = 1.0
"""How long spans may wait for a batch to fill (the SDK's default schedule delay is 5 s)."""

_log = get_logger("gateway.tracing")
_KINDS: Final = {
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "internal": SpanKind.INTERNAL,
}
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_MAX_NAME: Final = 64


def build_exporter(otlp: OtlpConfig) -> SpanExporter:
    """The SDK's OTLP exporter for ``otlp`` (headers resolved from their secret references)."""
    headers = {name: secret.reveal() for name, secret in otlp.headers}
    if otlp.protocol == "grpc":
        # grpcio is large and loads its own threads: only for a gateway that exports by gRPC.
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter as GrpcExporter,
        )

        parts = urlsplit(otlp.endpoint)
        return GrpcExporter(
            endpoint=parts.netloc,
            insecure=parts.scheme == "http",
            headers=headers,
            timeout=otlp.timeout_s,
        )
    endpoint = otlp.endpoint
    if urlsplit(endpoint).path in ("", "/"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"  # OTLP/HTTP's default traces path
    return OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=otlp.timeout_s)


class Tracing:
    """The endpoint's tracing hook and the export thread (see the module docstring)."""

    def __init__(
        self,
        config: TracingConfig,
        *,
        metrics: Metrics | None = None,
        exporter: SpanExporter | None = None,
    ) -> None:
        self._config = config
        self._metrics = metrics
        self._bound = TraceIdRatioBased.get_bound_for_rate(config.sample_ratio)
        self._max_spans = config.max_queue_spans
        self._exporter = exporter if exporter is not None else build_exporter(config.otlp)
        self._resource = Resource.create(
            {"service.name": config.service_name, "service.version": __version__}
        )
        self._scope = InstrumentationScope("mcp-resource-gateway", __version__)
        self._queue: collections.deque[RequestTrace] = collections.deque()
        self._pending = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._failures = 0
        self._failure_logged_at = float("-inf")
        # The exporter logs every failed batch (and each retry): our own line replaces them.
        logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="otlp-export", daemon=True)
            self._thread.start()

    def close(self, timeout_s: float | None = None) -> None:
        """Export what is queued (at most ``timeout_s``, default ``otlp.timeout_s``), then stop."""
        self._stopping = True
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(self._config.otlp.timeout_s if timeout_s is None else timeout_s)
        self._exporter.shutdown()

    # --- the request's path ----------------------------------------------------------------

    def begin(self, trace: TraceContext) -> RequestTrace | None:
        """A sampled request's trace, or None (then nothing is recorded for it)."""
        if trace.parent_id is not None:
            sampled = bool(trace.flags & FLAG_SAMPLED)
        else:
            sampled = int(trace.trace_id[16:], 16) < self._bound  # TraceIdRatioBased's test
        if not sampled:
            return None
        server = SpanRecord("mcp", "server", trace.span_id, trace.parent_id, {})
        return RequestTrace(
            trace.trace_id, server, trace.parent_id, trace.flags | FLAG_SAMPLED, trace.tracestate
        )

    def finish(self, trace: RequestTrace, ctx: RequestContext) -> None:
        trace.closed = True  # a task the request left behind records nothing more into it
        server = trace.server
        server.end_ns = time.time_ns()
        server.name, server.attributes = _server_span(ctx, server.attributes)
        server.error = _error_type(ctx)
        spans = 1 + len(trace.children)
        with self._lock:
            if self._pending + spans > self._max_spans:
                full = True
            else:
                full = False
                self._pending += spans
                self._queue.append(trace)
                wake = self._pending >= BATCH_SPANS
        if full:
            self._dropped("queue_full", spans)
        elif wake:
            self._wake.set()

    # --- the export thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._wake.wait(EXPORT_DELAY_S)
            self._wake.clear()
            self._export_queued()
            if self._stopping:
                return

    def _export_queued(self) -> None:
        while True:
            traces: list[RequestTrace] = []
            count = 0
            with self._lock:  # only the pops: a request's finish() never waits for conversion
                while self._queue and count < BATCH_SPANS:
                    trace = self._queue.popleft()
                    traces.append(trace)
                    count += 1 + len(trace.children)
                self._pending -= count
            if not traces:
                return
            batch = [span for trace in traces for span in self._readable(trace)]
            try:
                result = self._exporter.export(batch)
            except Exception:  # the exporter's fault must not end the thread
                result = SpanExportResult.FAILURE
            if result is not SpanExportResult.SUCCESS:
                self._dropped("export_failed", len(batch))
                self._export_failed()
            elif self._metrics is not None:
                self._metrics.trace_spans_exported_total.inc(len(batch))

    def _export_failed(self) -> None:
        self._failures += 1
        now = time.monotonic()
        if now - self._failure_logged_at >= FAILURE_LOG_INTERVAL_S:
            self._failure_logged_at = now
            _log.warning(
                "tracing.export_failed",
                failed_exports=self._failures,
                endpoint=self._config.otlp.endpoint,
                protocol=self._config.otlp.protocol,
            )
            self._failures = 0

    def _dropped(self, reason: str, spans: int) -> None:
        if self._metrics is not None:
            self._metrics.trace_spans_dropped_total.labels(reason).inc(spans)

    def _readable(self, trace: RequestTrace) -> list[ReadableSpan]:
        trace_id = int(trace.trace_id, 16)
        server = trace.server
        parent = (
            SpanContext(trace_id, int(trace.parent_id, 16), True, _SAMPLED)
            if trace.parent_id is not None
            else None
        )
        links = [
            Link(SpanContext(int(tid, 16), int(sid, 16), True, _SAMPLED))
            for tid, sid in trace.links
        ]
        spans = [self._span(trace_id, server, parent, links)]
        for child in trace.children:
            own = SpanContext(trace_id, int(child.parent_id or server.span_id, 16), False, _SAMPLED)
            spans.append(self._span(trace_id, child, own, ()))
        return spans

    def _span(
        self,
        trace_id: int,
        record: SpanRecord,
        parent: SpanContext | None,
        links: list[Link] | tuple[()],
    ) -> ReadableSpan:
        attributes: dict[str, AttributeValue] = dict(record.attributes)
        status = Status(StatusCode.UNSET)
        if record.error is not None:
            attributes["error.type"] = record.error
            status = Status(StatusCode.ERROR)
        return ReadableSpan(
            name=record.name,
            context=SpanContext(trace_id, int(record.span_id, 16), False, _SAMPLED),
            parent=parent,
            resource=self._resource,
            attributes=attributes,
            links=links,
            kind=_KINDS[record.kind],
            status=status,
            start_time=record.start_ns,
            end_time=record.end_ns or record.start_ns,
            instrumentation_scope=self._scope,
        )


def _server_span(
    ctx: RequestContext, attributes: dict[str, AttributeValue]
) -> tuple[str, dict[str, AttributeValue]]:
    """The server span's name and attributes from the request's record (MCP conventions)."""
    method = ctx.method
    known = method is not None and (method in METHOD_LABELS or method.startswith("notifications/"))
    attributes["network.transport"] = "tcp"
    attributes["network.protocol.name"] = "http"
    attributes["client.address"] = ctx.client_ip
    attributes["http.request.method"] = ctx.http_method
    attributes["http.response.status_code"] = ctx.status
    attributes["mcp_gateway.request_id"] = ctx.request_id
    if ctx.error_row is not None:
        attributes["mcp_gateway.error_row"] = ctx.error_row
    if ctx.jsonrpc_code is not None:
        attributes["rpc.response.status_code"] = str(ctx.jsonrpc_code)
    if method is None:
        return "mcp", attributes
    # An unknown method is the client's text: recorded only in its bounded form.
    attributes["mcp.method.name"] = method if known else "_OTHER"
    name = method if known else "mcp"
    if ctx.protocol_version is not None:
        attributes["mcp.protocol.version"] = ctx.protocol_version
    if ctx.jsonrpc_id is not None:
        attributes["jsonrpc.request.id"] = str(ctx.jsonrpc_id)
    if ctx.decision is not None:
        attributes["mcp_gateway.decision"] = "allow" if ctx.decision.allowed else "deny"
    if ctx.backend is not None:
        attributes["mcp_gateway.backend"] = ctx.backend
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
        if ctx.outcome is not None:
            attributes["mcp_gateway.outcome"] = ctx.outcome
        # A tool the catalog does not have (or the caller may not see) is the client's text.
        if ctx.tool and ctx.error_row != "unknown_tool":
            tool = ctx.tool[:_MAX_NAME]
            attributes["gen_ai.tool.name"] = tool
            name = f"{method} {tool}"
    return name, attributes


def _error_type(ctx: RequestContext) -> str | None:
    """``error.type`` (MCP conventions note [1]): the JSON-RPC code, ``tool_error``, or ours."""
    if ctx.jsonrpc_code is not None:
        return str(ctx.jsonrpc_code)
    if ctx.status >= 400 or ctx.status == 499:
        return ctx.error_row or str(ctx.status)
    outcome = ctx.outcome
    if outcome is not None and outcome not in ("ok", "input_required"):
        return outcome
    return None
