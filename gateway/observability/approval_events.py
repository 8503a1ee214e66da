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

from dataclasses import dataclass
from typing import Final, Literal

from gateway.observability.approval_metrics import ApprovalMetrics
from gateway.observability.event_trail import EventTrail, sparse_line
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
        return sparse_line(ts, self, _FIELDS)


class ApprovalAudit(EventTrail[ApprovalMetrics]):
    """Writes the events (module docstring)."""

    def emit(self, event: EventName, approval: str, **fields: str | None) -> None:
        """Write ``event`` (a ``subject`` is fingerprinted here when configured)."""
        subject = fields.pop("subject", None)
        shown = self.subject(subject)
        record = ApprovalEvent(event, approval[:32], subject=shown, **fields)
        if self._metrics is not None:
            self._metrics.total.labels(event=event.removeprefix("approval_")).inc()
        self._write(record)
        _log.info(
            f"approval.{event.removeprefix('approval_')}",
            approval=record.approval,
            tool=record.tool,
            backend=record.backend,
            approvers=record.approvers,
            subject=shown,
            outcome=record.outcome,
        )
