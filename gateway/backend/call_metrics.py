"""One backend's ``backend_requests_total`` and ``backend_duration_seconds``, counted per call.

Label children are looked up once per (bounded) label set, not per call: ``labels()`` with
keyword arguments was 2 % of the CPU per call; they are updated without prometheus-client's
lock (:mod:`gateway.observability.loop_metrics`).
"""

from __future__ import annotations

from typing import Any, Final

from gateway.observability import loop_metrics
from gateway.observability.metrics import Metrics

__all__ = ["BackendCallMetrics"]

MAX_CHILDREN: Final = 4096
"""Metric label children remembered per backend (tool labels are bounded by the catalog)."""


class BackendCallMetrics:
    """The call metrics of the backend ``backend``."""

    __slots__ = ("_backend", "_children", "_metrics")

    def __init__(self, metrics: Metrics, backend: str) -> None:
        self._metrics = metrics
        self._backend = backend
        self._children: dict[Any, Any] = {}
        """Label children by (tool label, outcome) and by tool label."""

    def count(self, label: str, outcome: str, elapsed: float | None) -> None:
        """One call of the tool labelled ``label``; ``elapsed``: its upstream time, None when
        nothing was sent."""
        children = self._children
        counter = children.get((label, outcome))
        if counter is None:
            if len(children) > MAX_CHILDREN:
                children.clear()  # tool names churned: start over (still bounded)
            counter = loop_metrics.counter(
                self._metrics.backend_requests_total.labels(
                    backend=self._backend, tool=label, outcome=outcome
                )
            )
            children[(label, outcome)] = counter
        counter.inc()
        if elapsed is not None:
            histogram = children.get(label)
            if histogram is None:
                histogram = children[label] = loop_metrics.histogram(
                    self._metrics.backend_duration_seconds.labels(backend=self._backend, tool=label)
                )
            histogram.observe(elapsed)
