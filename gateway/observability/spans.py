"""The spans of one request, recorded where they happen, exported later (``tracing:``).

The layers that do the work (the token check in ``auth/``, the policy decision and the backend
call) mark their steps with :func:`child` and :func:`annotate`. Both read one context variable,
set by the MCP endpoint for a sampled request only; without ``tracing:`` (or for a request the
sampler left out) it is unset and both return at once: no tracing code and no OpenTelemetry
import on that path. With it, a step is a :class:`SpanRecord` (ids, times, a few attributes)
appended to the request's :class:`RequestTrace`; :mod:`gateway.observability.otel` turns the
finished trace into OpenTelemetry spans in its export thread, off the request's path.

Span ids are minted here (:func:`~gateway.observability.tracing.new_span_id`) so the
``traceparent`` sent to the backend names the backend call's own span, and the gateway's server
span is the span id already in the request's log lines (``span_id``).

Attributes are never a token, a secret, an argument value or a result: callers pass names,
counts, statuses and row names only (docs/operations.md#tracing lists every attribute).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextvars import ContextVar, Token
from typing import Any, Final, Literal, Protocol

from gateway.observability.tracing import TraceContext, child_traceparent, new_span_id
from gateway.seams import RequestContext

__all__ = [
    "NO_SPAN",
    "AttributeValue",
    "OpenSpan",
    "RequestTrace",
    "RequestTracer",
    "SpanRecord",
    "annotate",
    "child",
    "current_trace",
    "enter",
]

AttributeValue = str | int | float | bool
SpanKind = Literal["internal", "client", "server"]


class RequestTracer(Protocol):
    """What the MCP endpoint calls when ``tracing:`` is configured
    (:class:`gateway.observability.otel.Tracing`)."""

    def begin(self, trace: TraceContext) -> RequestTrace | None: ...

    def finish(self, trace: RequestTrace, ctx: RequestContext) -> None: ...


class SpanRecord:
    """One finished (or open) step: what an OpenTelemetry span is built from."""

    __slots__ = (
        "attributes",
        "end_ns",
        "error",
        "kind",
        "name",
        "parent_id",
        "span_id",
        "start_ns",
    )

    def __init__(
        self,
        name: str,
        kind: SpanKind,
        span_id: str,
        parent_id: str | None,
        attributes: dict[str, AttributeValue],
    ) -> None:
        self.name = name
        self.kind = kind
        self.span_id = span_id
        self.parent_id = parent_id
        self.attributes = attributes
        self.start_ns = time.time_ns()
        self.end_ns = 0
        self.error: str | None = None
        """``error.type`` (and span status ERROR) when the step failed."""


class RequestTrace:
    """A sampled request's spans: the server span and its children, in finishing order."""

    __slots__ = (
        "children",
        "closed",
        "flags",
        "links",
        "parent_id",
        "server",
        "trace_id",
        "tracestate",
    )

    def __init__(
        self,
        trace_id: str,
        server: SpanRecord,
        parent_id: str | None,
        flags: int,
        tracestate: str | None,
    ) -> None:
        self.trace_id = trace_id
        self.server = server
        self.parent_id = parent_id
        """The caller's span (remote parent), or None for a trace the gateway started."""
        self.flags = flags
        self.tracestate = tracestate
        self.links: list[tuple[str, str]] = []
        """(trace id, span id) of contexts the server span is linked to, not parented by."""
        self.children: list[SpanRecord] = []
        self.closed = False
        """Finished and queued for export: no further child is recorded."""

    def traceparent(self, span_id: str) -> str:
        """The ``traceparent`` naming ``span_id`` of this trace as the parent."""
        return child_traceparent(self.trace_id, span_id, self.flags)


_CURRENT: ContextVar[tuple[RequestTrace, SpanRecord] | None] = ContextVar(
    "gateway_span", default=None
)


def current_trace() -> RequestTrace | None:
    """The trace of the request being served in this context, if it is sampled."""
    current = _CURRENT.get()
    return None if current is None else current[0]


def enter(trace: RequestTrace | None) -> None:
    """Make ``trace``'s server span the current span, or (None) record nothing: the endpoint,
    at every request's start (a request task may serve several requests of a connection)."""
    _CURRENT.set(None if trace is None else (trace, trace.server))


def annotate(key: str, value: AttributeValue) -> None:
    """Set an attribute on the current span, when there is one."""
    current = _CURRENT.get()
    if current is not None:
        current[1].attributes[key] = value


class _Child:
    """The context manager of :func:`child` for a sampled request."""

    __slots__ = ("_record", "_token", "_trace")

    def __init__(self, trace: RequestTrace, record: SpanRecord) -> None:
        self._trace = trace
        self._record = record
        self._token: Token[tuple[RequestTrace, SpanRecord] | None] | None = None

    @property
    def traceparent(self) -> str | None:
        """The ``traceparent`` that makes this span the parent of the next hop."""
        return self._trace.traceparent(self._record.span_id)

    @property
    def tracestate(self) -> str | None:
        return self._trace.tracestate

    def set(self, key: str, value: AttributeValue) -> None:
        self._record.attributes[key] = value

    def fail(self, error_type: str) -> None:
        self._record.error = error_type

    def __enter__(self) -> _Child:
        self._token = _CURRENT.set((self._trace, self._record))
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        record = self._record
        record.end_ns = time.time_ns()
        if exc is not None and record.error is None:
            record.error = getattr(exc, "row", None) or type(exc).__name__
        if self._token is not None:
            _CURRENT.reset(self._token)
        if not self._trace.closed:
            self._trace.children.append(record)


class _NoSpan:
    """:func:`child` outside a sampled request: nothing is recorded."""

    __slots__ = ()
    traceparent: Final = None
    tracestate: Final = None

    def set(self, key: str, value: AttributeValue) -> None:
        return

    def fail(self, error_type: str) -> None:
        return

    def __enter__(self) -> _NoSpan:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        return


NO_SPAN: Final = _NoSpan()


OpenSpan = _Child | _NoSpan
"""What :func:`child` gives: a recording span, or :data:`NO_SPAN`."""


def child(
    name: str,
    *,
    kind: SpanKind = "internal",
    attributes: Mapping[str, AttributeValue] | None = None,
) -> OpenSpan:
    """``with child("mcp_gateway.introspection", kind="client") as span:`` a step of the
    current request (a child of the innermost open span), or nothing outside a sampled one."""
    current = _CURRENT.get()
    if current is None:
        return NO_SPAN
    trace, parent = current
    if trace.closed:
        return NO_SPAN
    record = SpanRecord(name, kind, new_span_id(), parent.span_id, dict(attributes or {}))
    return _Child(trace, record)
