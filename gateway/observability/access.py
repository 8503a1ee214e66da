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
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from functools import lru_cache
from typing import Any, Final, Literal

import structlog

from gateway.config import LoggingConfig
from gateway.observability import loop_metrics
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
        "_in_flight",
        "_log",
        "_log_arguments",
        "_metrics",
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
        self._clock = clock
        self._wallclock = wallclock
        self._log = get_logger("gateway.access")
        # Label children are looked up once per label set (bounded) instead of per request,
        # and updated without prometheus-client's lock (:mod:`.loop_metrics`).
        self._in_flight = loop_metrics.gauge(metrics.in_flight) if record_request_metrics else None
        self._requests: dict[tuple[str, str, str], loop_metrics.LoopValue] = {}
        self._durations: dict[str, loop_metrics.LoopHistogram] = {}
        self._rejections: dict[str, loop_metrics.LoopValue] = {}

    # --- Observer ---------------------------------------------------------------------------

    def request_started(self, ctx: RequestContext) -> None:
        """Count the request in flight and bind request_id/trace_id for every log line of it."""
        if self._in_flight is not None:
            self._in_flight.inc()
        _tokens.set(
            structlog.contextvars.bind_contextvars(request_id=ctx.request_id, trace_id=ctx.trace_id)
        )

    def request_finished(self, ctx: RequestContext) -> None:
        """Metrics, the access line, the audit event (tools/call); then unbind the context."""
        metrics = self._metrics
        duration_s = self._clock() - ctx.started
        try:
            decision = _decision_label(ctx)
            if self._in_flight is not None:
                self._in_flight.dec()
                self._count_request(method_label(ctx.method), ctx.status, decision, duration_s)
            row = ctx.error_row
            if row is not None:
                child = self._rejections.get(row)
                if child is None:  # keyed by row name: a bounded set (the status table)
                    bounded = metrics.row_label(row)
                    child = loop_metrics.counter(metrics.rejections_total.labels(bounded))
                    self._rejections[row] = child
                child.inc()
            shared = _Shared(ctx, decision, duration_s, self._subject_plain)
            self._access_line(ctx, shared)
            if self._audit is not None and ctx.method in _AUDITED_METHODS:
                now = self._wallclock()
                if ctx.calls:  # a batch: one event per tools/call member
                    for call in ctx.calls:
                        self._audit.emit(self._batch_event(ctx, call, shared), now)
                elif (
                    ctx.tool is not None
                    or "audit_target" in ctx.extra
                    or (ctx.method in TASK_EVENT_NAMES)
                ):
                    self._audit.emit(self._audit_event(ctx, shared), now)
        finally:
            self._unbind()

    # --- pieces -----------------------------------------------------------------------------

    def _count_request(self, method: str, status: int, decision: str, duration_s: float) -> None:
        key = (method, str(status), decision)
        child = self._requests.get(key)
        if child is None:
            child = loop_metrics.counter(self._metrics.requests_total.labels(*key))
            self._requests[key] = child
        child.inc()
        histogram = self._durations.get(method)
        if histogram is None:
            histogram = loop_metrics.histogram(
                self._metrics.request_duration_seconds.labels(method)
            )
            self._durations[method] = histogram
        histogram.observe(duration_s)

    def _access_line(self, ctx: RequestContext, shared: _Shared) -> None:
        fields: dict[str, Any] = {
            "request_id": ctx.request_id,
            "trace_id": ctx.trace_id,
            "span_id": ctx.span_id,
            "http_method": ctx.http_method,
            "method": None if ctx.method is None else ctx.method[:_MAX_METHOD],
            "tool": shared.tool,
            "backend": ctx.backend,
            "era": ctx.era,
            "protocol_version": (
                None if ctx.protocol_version is None else ctx.protocol_version[:_MAX_VERSION]
            ),
            "status": ctx.status,
            "jsonrpc_code": ctx.jsonrpc_code,
            "decision": shared.decision,
            "rule": shared.rule,
            "subject": shared.subject,
            "client_id": shared.client_id,
            "issuer": shared.issuer,
            "token_fp": shared.token_fp,
            "client_ip": ctx.client_ip,
            "duration_ms": shared.duration_ms,
            "backend_ms": shared.backend_ms,
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

    def _audit_event(self, ctx: RequestContext, shared: _Shared) -> AuditEvent:
        outcome = ctx.outcome
        if outcome is None:
            outcome = (
                "denied" if shared.decision == "deny" else ("rejected" if ctx.error_row else "ok")
            )
        extra = ctx.extra
        arguments = extra.get("arguments") if self._log_arguments else None
        # The records' functions take None to None: not called for what the call did not do.
        found = extra.get
        return self._event(
            ctx,
            ctx.decision,
            shared,
            tool=shared.tool,
            decision=shared.decision,
            outcome=outcome,
            backend_ms=shared.backend_ms,
            backend=ctx.backend,
            jsonrpc_code=ctx.jsonrpc_code,
            error_row=ctx.error_row,
            arguments=argument_shape(arguments) if isinstance(arguments, Mapping) else None,
            input=None if (raw := found("input")) is None else input_record(raw),
            exchange=None if (raw := found("exchange")) is None else exchange_record(raw),
            target=found("audit_target"),
            pdp=None if (raw := found("pdp")) is None else pdp_record(raw),
            guardrails=None if (raw := found("guardrails")) is None else guardrail_records(raw),
            task=None if (raw := found("task")) is None else task_record(raw),
            event=TASK_EVENT_NAMES.get(ctx.method or ""),
        )

    def _batch_event(self, ctx: RequestContext, call: CallRecord, shared: _Shared) -> AuditEvent:
        dec = call.decision
        arguments = call.arguments if self._log_arguments else None
        return self._event(
            ctx,
            dec,
            # The batch's duration: members run one after another inside one HTTP request.
            shared,
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

    @staticmethod
    def _event(
        ctx: RequestContext,
        dec: Decision | None,
        shared: _Shared,
        *,
        tool: str | None,
        decision: DecisionLabel,
        outcome: str,
        backend_ms: float | None,
        backend: str | None,
        jsonrpc_code: int | None,
        error_row: str | None,
        arguments: Mapping[str, str] | None,
        exchange: Mapping[str, Any] | None,
        pdp: Mapping[str, Any] | None,
        guardrails: Sequence[Mapping[str, str]] | None,
        input: Mapping[str, Any] | None = None,
        target: tuple[str, str, str] | None = None,
        task: Mapping[str, Any] | None = None,
        event: str | None = None,
    ) -> AuditEvent:
        """An audit event of ``ctx``: what every event of a request says of its caller
        (``shared``), the policy's decision ``dec`` and the request's duration, with the event's
        own fields."""
        return AuditEvent(
            request_id=ctx.request_id,
            trace_id=ctx.trace_id,
            subject=shared.subject,
            client_id=shared.client_id,
            tool=tool,
            decision=decision,
            rule=None if dec is None else dec.rule,
            missing_scopes=() if dec is None else dec.missing_scopes,
            granted_scopes=() if dec is None else dec.granted_scopes,
            condition=_CONDITION_REFUSALS.get(dec.reason) if dec is not None else None,
            outcome=outcome,
            duration_ms=shared.duration_ms,
            backend_ms=backend_ms,
            backend=backend,
            status=ctx.status,
            jsonrpc_code=jsonrpc_code,
            error_row=error_row,
            token_fp=shared.token_fp,
            auth_method=shared.auth_method,
            issuer=shared.issuer,
            arguments=arguments,
            input=input,
            exchange=exchange,
            target=target,
            pdp=pdp,
            guardrails=guardrails,
            task=task,
            event=event,
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


class _Shared:
    """What the access line and the audit event(s) of one request both carry, computed once
    per request: the caller (subject as configured), the tool and rule, the durations."""

    __slots__ = (
        "auth_method",
        "backend_ms",
        "client_id",
        "decision",
        "duration_ms",
        "issuer",
        "rule",
        "subject",
        "token_fp",
        "tool",
    )

    def __init__(
        self, ctx: RequestContext, decision: DecisionLabel, duration_s: float, plain: bool
    ) -> None:
        self.decision: DecisionLabel = decision
        principal = ctx.principal
        if principal is None:
            self.subject = self.client_id = self.issuer = None
            self.token_fp = self.auth_method = None
        else:
            self.subject = shown_subject(principal.subject, plain)
            self.client_id = principal.client_id
            self.issuer = principal.issuer
            self.token_fp = principal.fingerprint
            self.auth_method = principal.auth_method
        self.tool = None if ctx.tool is None else ctx.tool[:_MAX_TOOL]
        self.rule = None if ctx.decision is None else ctx.decision.rule
        self.duration_ms = round(duration_s * 1000.0, 3)
        self.backend_ms = None if ctx.backend_ms is None else round(ctx.backend_ms, 3)
