"""``guardrail_*``: the verdicts, failures and exchange durations of the processors of
``guardrails:`` (gateway/guardrails), per processor; its series exist only for configured
processors, at zero from the start (:meth:`GuardrailMetrics.register`)."""

from __future__ import annotations

from collections.abc import Iterable

from gateway.observability.collectors import Collectors
from gateway.observability.metric_labels import GUARDRAIL_FAILURES, GUARDRAIL_VERDICTS

__all__ = ["GuardrailMetrics"]


class GuardrailMetrics:
    """The guardrail collectors, built by :class:`~gateway.observability.metrics.Metrics`."""

    def __init__(self, make: Collectors) -> None:
        self.verdicts_total = make.counter(
            "guardrail_verdicts_total",
            "Guardrail verdicts by processor, check and verdict",
            ("guardrail", "check", "verdict"),
        )
        self.errors_total = make.counter(
            "guardrail_errors_total",
            "Guardrail exchanges that got no verdict, by processor and reason",
            ("guardrail", "reason"),
        )
        self.duration_seconds = make.histogram(
            "guardrail_duration_seconds",
            "Guardrail exchange duration by processor",
            ("guardrail",),
        )

    def register(self, name: str, checks: Iterable[str]) -> None:
        """A processor's series, at zero from the start."""
        for check in checks:
            for verdict in GUARDRAIL_VERDICTS:
                self.verdicts_total.labels(guardrail=name, check=check, verdict=verdict)
        for reason in GUARDRAIL_FAILURES:
            self.errors_total.labels(guardrail=name, reason=reason)
