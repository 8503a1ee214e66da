"""The MCP endpoint's trace context: the request's span, and a 2026-07-28 request's ``_meta``.

- :func:`begin` (``tracing:`` configured, every request): the sampler's decision; a sampled
  request's server span becomes the current span (:mod:`gateway.observability.spans`). A trace
  the gateway starts and does not record is forwarded unsampled (``traceparent`` flags 00), so
  the backend does not record half a trace either.
- :func:`adopt_meta` (every modern request, tracing or not): SEP-414 (2026-07-28
  basic/index.mdx §OpenTelemetry trace context) puts ``traceparent``/``tracestate`` in
  ``params._meta``. The MCP semantic conventions (§Context propagation) make that context the
  server span's parent and the HTTP header's context a link: MCP and transport contexts are
  independent. The request then continues the ``_meta`` trace: its log lines, audit event and
  the backend's ``traceparent`` carry that trace id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.observability import spans
from gateway.observability.spans import RequestTracer
from gateway.observability.tracing import (
    FLAG_SAMPLED,
    TraceContext,
    child_traceparent,
    parse_traceparent,
    sanitize_tracestate,
)
from gateway.seams import RequestContext

__all__ = ["adopt_meta", "begin"]


def begin(tracing: RequestTracer, trace: TraceContext, ctx: RequestContext) -> None:
    recorded = tracing.begin(trace)
    spans.enter(recorded)
    if recorded is None and trace.parent_id is None:
        ctx.traceparent = child_traceparent(trace.trace_id, trace.span_id, 0)


def adopt_meta(
    tracing: RequestTracer | None, meta: Mapping[str, Any] | Any, ctx: RequestContext
) -> None:
    """Continue the trace ``meta`` names (a modern request's ``params._meta``), if valid."""
    if not isinstance(meta, Mapping):
        return
    raw = meta.get("traceparent")
    parent = parse_traceparent(raw) if isinstance(raw, str) else None
    if parent is None:
        return  # absent or malformed: the header's context stands (W3C §4: no partial parse)
    state = meta.get("tracestate")
    tracestate = sanitize_tracestate(state) if isinstance(state, str) else None
    ctx.trace_id = parent.trace_id
    ctx.traceparent = child_traceparent(parent.trace_id, ctx.span_id, parent.flags)
    ctx.tracestate = tracestate
    if tracing is None:
        return
    current = spans.current_trace()
    sampled = bool(parent.flags & FLAG_SAMPLED)
    if current is None:
        if sampled:  # recorded from here on (the token check is already behind us)
            spans.enter(
                tracing.begin(
                    TraceContext(
                        parent.trace_id,
                        ctx.span_id,
                        parent.parent_id,
                        parent.flags,
                        ctx.traceparent,
                        tracestate,
                    )
                )
            )
        return
    if not sampled:
        spans.enter(None)  # the _meta parent did not record: neither do we
        return
    if (current.trace_id, current.parent_id) != (parent.trace_id, parent.parent_id):
        if current.parent_id is not None:
            current.links.append((current.trace_id, current.parent_id))
        current.trace_id = parent.trace_id
        current.parent_id = parent.parent_id
        current.server.parent_id = parent.parent_id
    current.flags = parent.flags | FLAG_SAMPLED
    current.tracestate = tracestate
