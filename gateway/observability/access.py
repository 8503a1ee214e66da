"""The gateway's :class:`~gateway.seams.Observer`: access line, request metrics, audit event.

Pipeline step 18 (docs/architecture.md): once per MCP request, after the response is decided,
:meth:`GatewayObserver.request_finished` writes exactly one structlog ``mcp.request`` line at INFO,
updates the request metrics and, for ``tools/call``, emits one audit event (one per
``tools/call`` member of a 2025-03-26 batch).

What is never written, here or anywhere (architecture invariant 4): the bearer token, secrets,
raw claim sets, argument values. The principal appears as its subject (as is, or a fingerprint
when ``logging.subject: fingerprint``), its client_id and the token *fingerprint* the
authenticator computed (``Principal.fingerprint``, non-reversible).

Client-controlled strings (JSON-RPC method, tool name, protocol version) are cut to fixed
lengths in logs; metric labels never carry them raw (:func:`~.metrics.method_label`,
:meth:`~.metrics.Metrics.tool_label`).

This runs on the hot path of every request; its cost is measured in docs/performance.md
("Observability").
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from functools import lru_cache
from typing import Any, Final, Literal

import structlog

from gateway.config import LoggingConfig
from gateway.observability.audit import AuditEvent, AuditSink
from gateway.observability.audit_records import (
    TASK_EVENT_NAMES,
    argument_shape,
    exchange_record,
    guardrail_records,
    input_record,
    pdp_record,
    task_record,
)
from gateway.observability.logging import emit_info, get_logger
from gateway.observability.metric_labels import method_label
from gateway.observability.metrics import Metrics
from gateway.seams import CallRecord, Decision, RequestContext

__all__ = ["ACCESS_EVENT", "GatewayObserver", "subject_fingerprint"]

ACCESS_EVENT: Final = "mcp.request"
"""The ``event`` of the one access line per MCP request."""

_MAX_METHOD: Final = 64
_MAX_TOOL: Final = 128
_MAX_VERSION: Final = 32

_AUDITED_METHODS: Final = frozenset(
    {"tools/call", "batch", "prompts/get", "resources/read", *TASK_EVENT_NAMES}
)
"""``batch`` (2025-03-26 JSON-RPC batches) lists its tools/call members in ``ctx.calls``; a
batch refused as a whole (403 step-up) carries the refused call in ``ctx.tool``."""

_tokens: ContextVar[Mapping[str, Token[Any]] | None] = ContextVar(
    "gateway_observer_tokens", default=None
)
"""The contextvars bound by request_started, reset (not just removed) by request_finished so an
outer binding of the same key (the app's request-id middleware) survives the request."""


@lru_cache(maxsize=4096)
def subject_fingerprint(subject: str) -> str:
    """``sha256:`` + 16 hex digits of SHA-256(subject): stable across replicas and restarts, so
    one caller's lines still correlate. Pseudonymous, not anonymous: a known subject can be
    hashed and matched (that is what lets operators investigate a named user)."""
    return "sha256:" + hashlib.sha256(subject.encode("utf-8")).hexdigest()[:16]


def shown_subject(subject: str | None, plain: bool) -> str | None:
    """``subject`` as ``logging.subject`` says: itself when ``plain``, else its fingerprint."""
    if subject is None or plain:
        return subject
    return subject_fingerprint(subject)


DecisionLabel = Literal["allow", "deny", "none"]


def _decision_label(ctx: RequestContext) -> DecisionLabel:
    decision = ctx.decision
    if decision is None:
        return "none"
    return "allow" if decision.allowed else "deny"


class GatewayObserver:
    """Implements :class:`gateway.seams.Observer` for the MCP endpoint.

    ``record_request_metrics=False`` leaves ``in_flight``, ``requests_total`` and
    ``request_duration_seconds`` to the caller (for an endpoint that records them itself);
    ``rejections_total``, the access line and the audit event are always written. Backend,
    introspection and cache metrics belong to the layers that see those calls.
    ``clock``/``wallclock`` are injectable for tests (``time.monotonic``/``time.time``).
    """

    __slots__ = (
        "_audit",
        "_clock",
        "_durations",
        "_log",
        "_log_arguments",
        "_metrics",
        "_record_requests",
        "_rejections",
        "_requests",
        "_subject_plain",
        "_wallclock",
    )

    def __init__(
        self,
        *,
        metrics: Metrics,
        logging_config: LoggingConfig,
        audit: AuditSink | None,
        record_request_metrics: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wallclock: Callable[[], float] = time.time,
    ) -> None:
        self._metrics = metrics
        self._audit = audit if audit is not None and audit.enabled else None
        self._subject_plain = logging_config.subject == "plain"
        self._log_arguments = logging_config.log_arguments
        self._record_requests = record_request_metrics
        self._clock = clock
        self._wallclock = wallclock
        self._log = get_logger("gateway.access")
        # Label children are looked up once per label set (bounded) instead of per request.
        self._requests: dict[tuple[str, str, str], Any] = {}
        self._durations: dict[str, Any] = {}
        self._rejections: dict[str, Any] = {}

    # --- Observer ---------------------------------------------------------------------------

    def request_started(self, ctx: RequestContext) -> None:
        """Count the request in flight and bind request_id/trace_id for every log line of it."""
        if self._record_requests:
            self._metrics.in_flight.inc()
        _tokens.set(
            structlog.contextvars.bind_contextvars(request_id=ctx.request_id, trace_id=ctx.trace_id)
        )

    def request_finished(self, ctx: RequestContext) -> None:
        """Metrics, the access line, the audit event (tools/call); then unbind the context."""
        metrics = self._metrics
        duration_s = self._clock() - ctx.started
        try:
            decision = _decision_label(ctx)
            label = method_label(ctx.method)
            if self._record_requests:
                metrics.in_flight.dec()
                self._count_request(label, ctx.status, decision, duration_s)
            row = ctx.error_row
            if row is not None:
                child = self._rejections.get(row)
                if child is None:  # keyed by row name: a bounded set (the status table)
                    bounded = metrics.row_label(row)
                    child = self._rejections[row] = metrics.rejections_total.labels(bounded)
                child.inc()
            self._access_line(ctx, decision, duration_s)
            if self._audit is not None and ctx.method in _AUDITED_METHODS:
                now = self._wallclock()
                if ctx.calls:  # a batch: one event per tools/call member
                    for call in ctx.calls:
                        self._audit.emit(self._batch_event(ctx, call, duration_s), now)
                elif (
                    ctx.tool is not None
                    or "audit_target" in ctx.extra
                    or (ctx.method in TASK_EVENT_NAMES)
                ):
                    self._audit.emit(self._audit_event(ctx, decision, duration_s), now)
        finally:
            self._unbind()

    # --- pieces -----------------------------------------------------------------------------

    def _count_request(self, method: str, status: int, decision: str, duration_s: float) -> None:
        key = (method, str(status), decision)
        child = self._requests.get(key)
        if child is None:
            child = self._requests[key] = self._metrics.requests_total.labels(*key)
        child.inc()
        histogram = self._durations.get(method)
        if histogram is None:
            histogram = self._durations[method] = self._metrics.request_duration_seconds.labels(
                method
            )
        histogram.observe(duration_s)

    def _subject(self, subject: str | None) -> str | None:
        return shown_subject(subject, self._subject_plain)

    def _access_line(self, ctx: RequestContext, decision: DecisionLabel, duration_s: float) -> None:
        principal = ctx.principal
        dec = ctx.decision
        fields: dict[str, Any] = {
            "request_id": ctx.request_id,
            "trace_id": ctx.trace_id,
            "span_id": ctx.span_id,
            "http_method": ctx.http_method,
            "method": None if ctx.method is None else ctx.method[:_MAX_METHOD],
            "tool": None if ctx.tool is None else ctx.tool[:_MAX_TOOL],
            "backend": ctx.backend,
            "era": ctx.era,
            "protocol_version": (
                None if ctx.protocol_version is None else ctx.protocol_version[:_MAX_VERSION]
            ),
            "status": ctx.status,
            "jsonrpc_code": ctx.jsonrpc_code,
            "decision": decision,
            "rule": None if dec is None else dec.rule,
            "subject": None if principal is None else self._subject(principal.subject),
            "client_id": None if principal is None else principal.client_id,
            "issuer": None if principal is None else principal.issuer,
            "token_fp": None if principal is None else principal.fingerprint,
            "client_ip": ctx.client_ip,
            "duration_ms": round(duration_s * 1000.0, 3),
            "backend_ms": None if ctx.backend_ms is None else round(ctx.backend_ms, 3),
            "bytes_in": ctx.bytes_in,
            "bytes_out": ctx.bytes_out,
            "error_row": ctx.error_row,
            "outcome": ctx.outcome,
        }
        if self._log_arguments:
            arguments = ctx.extra.get("arguments")
            if isinstance(arguments, Mapping):
                fields["arguments"] = argument_shape(arguments)
        emit_info(self._log, ACCESS_EVENT, fields)

    def _audit_event(
        self, ctx: RequestContext, decision: DecisionLabel, duration_s: float
    ) -> AuditEvent:
        outcome = ctx.outcome
        if outcome is None:
            outcome = "denied" if decision == "deny" else ("rejected" if ctx.error_row else "ok")
        arguments = ctx.extra.get("arguments") if self._log_arguments else None
        return self._event(
            ctx,
            ctx.decision,
            duration_s,
            tool=None if ctx.tool is None else ctx.tool[:_MAX_TOOL],
            decision=decision,
            outcome=outcome,
            backend_ms=None if ctx.backend_ms is None else round(ctx.backend_ms, 3),
            backend=ctx.backend,
            jsonrpc_code=ctx.jsonrpc_code,
            error_row=ctx.error_row,
            arguments=argument_shape(arguments) if isinstance(arguments, Mapping) else None,
            input=input_record(ctx.extra.get("input")),
            exchange=exchange_record(ctx.extra.get("exchange")),
            target=ctx.extra.get("audit_target"),
            pdp=pdp_record(ctx.extra.get("pdp")),
            guardrails=guardrail_records(ctx.extra.get("guardrails")),
            task=task_record(ctx.extra.get("task")),
            event=TASK_EVENT_NAMES.get(ctx.method or ""),
        )

    def _batch_event(self, ctx: RequestContext, call: CallRecord, duration_s: float) -> AuditEvent:
        dec = call.decision
        arguments = call.arguments if self._log_arguments else None
        return self._event(
            ctx,
            dec,
            # The batch's duration: members run one after another inside one HTTP request.
            duration_s,
            tool=call.tool[:_MAX_TOOL],
            decision="none" if dec is None else ("allow" if dec.allowed else "deny"),
            outcome=call.outcome,
            backend_ms=None if call.backend_ms is None else round(call.backend_ms, 3),
            backend=call.backend,
            jsonrpc_code=call.jsonrpc_code,
            error_row=call.error_row,
            arguments=argument_shape(arguments) if arguments is not None else None,
            exchange=exchange_record(call.exchange),
            pdp=pdp_record(call.pdp),
            guardrails=guardrail_records(call.guardrails),
        )

    def _event(
        self, ctx: RequestContext, dec: Decision | None, duration_s: float, **fields: Any
    ) -> AuditEvent:
        """An audit event of ``ctx``: what every event of a request says of its caller, the
        policy's decision ``dec`` and its duration, with the event's own ``fields``."""
        principal = ctx.principal
        return AuditEvent(
            request_id=ctx.request_id,
            trace_id=ctx.trace_id,
            subject=None if principal is None else self._subject(principal.subject),
            client_id=None if principal is None else principal.client_id,
            rule=None if dec is None else dec.rule,
            missing_scopes=() if dec is None else dec.missing_scopes,
            granted_scopes=() if dec is None else dec.granted_scopes,
            condition=_CONDITION_REFUSALS.get(dec.reason) if dec is not None else None,
            duration_ms=round(duration_s * 1000.0, 3),
            status=ctx.status,
            token_fp=None if principal is None else principal.fingerprint,
            auth_method=None if principal is None else principal.auth_method,
            issuer=None if principal is None else principal.issuer,
            **fields,
        )

    @staticmethod
    def _unbind() -> None:
        tokens = _tokens.get()
        if tokens is None:
            structlog.contextvars.unbind_contextvars("request_id", "trace_id")
            return
        _tokens.set(None)
        try:
            structlog.contextvars.reset_contextvars(**tokens)
        except ValueError:
            # Finished in another Context than it started (e.g. a callback): just remove them.
            structlog.contextvars.unbind_contextvars("request_id", "trace_id")


_CONDITION_REFUSALS: Final = {"condition": "false", "condition_error": "error"}
"""``Decision.reason`` of a ``when:`` refusal -> the audit event's ``condition``."""
