"""``approvals_total{event}``: the approval records (docs/policy.md#approvals) by event, at
zero from the start; pending now is ``requested`` less ``approved``, ``denied`` and
``expired``."""

from __future__ import annotations

from gateway.observability.collectors import Collectors
from gateway.observability.metric_labels import APPROVAL_EVENTS

__all__ = ["ApprovalMetrics"]


class ApprovalMetrics:
    """The approval collectors, built by :class:`~gateway.observability.metrics.Metrics`."""

    def __init__(self, make: Collectors) -> None:
        self.total = make.counter(
            "approvals_total",
            "Approval records by event: requested, approved, denied, expired, executed",
            ("event",),
            zero=APPROVAL_EVENTS,
        )
