"""What human approval (docs/policy.md#approvals) writes to the audit trail, the log and the
metrics.

One event per request for approval (``approval_requested``), decision (``approval_approved``,
``approval_denied``), expiry seen (``approval_expired``: written once, by whichever replica
first finds the record past its time, at a retry or a page) and approved call that ran
(``approval_executed``, with the call's outcome), linked by the record's digest (``approval``).
An event names the caller (or the decider) by issuer and subject (as ``logging.subject`` says:
plain or a fingerprint), the tool, the backend, the approver set and the preview's hash; never
the arguments, a token or a cookie. Counted in ``mcp_gateway_approvals_total{event}`` (pending
now: ``requested`` less ``approved``, ``denied`` and ``expired``), logged as
``approval.<event>``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from gateway.config import LoggingConfig
from gateway.observability.access import subject_fingerprint
from gateway.observability.approval_metrics import ApprovalMetrics
from gateway.observability.audit import AuditSink, rfc3339
from gateway.observability.lines import json_line
from gateway.observability.logging import get_logger

__all__ = ["ApprovalAudit", "ApprovalEvent"]

EventName = Literal[
    "approval_requested",
    "approval_approved",
    "approval_denied",
    "approval_expired",
    "approval_executed",
]
_FIELDS: Final = (
    "request_id",
    "approval",
    "tool",
    "backend",
    "approvers",
    "issuer",
    "subject",
    "preview_sha256",
    "outcome",
)
_log = get_logger("gateway.approvals")


@dataclass(frozen=True, slots=True)
class ApprovalEvent:
    """One audit event of human approval (module docstring)."""

    event: EventName
    approval: str
    """The record's digest (hex, 32 characters): what links a record's events."""
    tool: str | None = None
    backend: str | None = None
    approvers: str | None = None
    issuer: str | None = None
    subject: str | None = None
    """The caller (``requested``, ``expired``, ``executed``) or the decider."""
    preview_sha256: str | None = None
    outcome: str | None = None
    """``executed``: the call's outcome (``ok``, ``tool_error``, ``timeout``, ...)."""
    request_id: str | None = None

    def to_json(self, ts: float) -> str:
        record: dict[str, object] = {"ts": rfc3339(ts), "log": "audit", "event": self.event}
        for name in _FIELDS:
            value = getattr(self, name)
            if value is not None:
                record[name] = value
        return json_line(record)


class ApprovalAudit:
    """Writes the events (module docstring)."""

    def __init__(
        self,
        sink: AuditSink | None,
        metrics: ApprovalMetrics | None,
        logging_config: LoggingConfig,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sink = sink
        self._metrics = metrics
        self._plain = logging_config.subject == "plain"
        self._clock = clock

    def emit(self, event: EventName, approval: str, **fields: str | None) -> None:
        """Write ``event`` (a ``subject`` is fingerprinted here when configured)."""
        subject = fields.pop("subject", None)
        shown = subject if subject is None or self._plain else subject_fingerprint(subject)
        record = ApprovalEvent(event, approval[:32], subject=shown, **fields)
        if self._metrics is not None:
            self._metrics.total.labels(event=event.removeprefix("approval_")).inc()
        if self._sink is not None:
            self._sink.emit(record, self._clock())
        _log.info(
            f"approval.{event.removeprefix('approval_')}",
            approval=record.approval,
            tool=record.tool,
            backend=record.backend,
            approvers=record.approvers,
            subject=shown,
            outcome=record.outcome,
        )
