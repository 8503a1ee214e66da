"""How the gateway's collectors are made: the ``mcp_gateway_`` prefix, the latency buckets of
every histogram, and a counter's fixed-vocabulary series created at zero (split from
:mod:`gateway.observability.metrics`, which builds them all on its private registry)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)

__all__ = ["LATENCY_BUCKETS", "PREFIX", "Collectors"]

PREFIX: Final = "mcp_gateway_"

# The ``*_created`` companion series double every counter's series count and no rule or
# dashboard reads them (process-wide switch; the gateway owns its process).
disable_created_metrics()  # type: ignore[no-untyped-call]

LATENCY_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


class Collectors:
    """Builds the collectors on one registry: the ``mcp_gateway_`` prefix, the latency buckets
    of every histogram, and a counter's fixed-vocabulary series created at zero (``zero``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def counter(
        self, name: str, doc: str, labels: tuple[str, ...] = (), *, zero: Iterable[str] = ()
    ) -> Counter:
        made = Counter(PREFIX + name, doc, labels, registry=self._registry)
        for value in zero:  # only with one label
            made.labels(value)
        return made

    def histogram(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Histogram:
        return Histogram(
            PREFIX + name, doc, labels, buckets=LATENCY_BUCKETS, registry=self._registry
        )

    def gauge(self, name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
        return Gauge(PREFIX + name, doc, labels, registry=self._registry)
