"""One ``/metrics`` for the process group of ``serve --workers N``.

The supervisor owns the group's ops listener; each worker keeps its own registry
(:class:`~gateway.observability.metrics.Metrics`, unchanged, nothing extra on the request path)
and serves it on a private Unix socket. At each scrape the supervisor reads every worker's
exposition (OpenMetrics) and :class:`GroupMetrics` merges the families into one, with the same
names, types and labels as a single gateway exposes (``docs/operations.md`` stays true, the
alert rules keep working, no ``worker`` label multiplies the series):

* counters and histograms are **summed**. A worker that exits (crash or restart) keeps its last
  scraped values in the sum ("retired"), so a group counter never goes down while the group
  runs (Prometheus would read a drop as a counter reset and count the whole remaining total as
  new increase); only the increments since that worker's last scrape are lost;
* every gauge has an explicit rule (:data:`GAUGE_MERGE`): ``sum`` for quantities (requests in
  flight and the in-flight capacity, so the Saturation ratio is the group's), ``max`` for "the
  worst worker" (the catalog age, hidden colliding tools), ``min`` where 0 means trouble (the
  catalog size, a backend's readiness, the last policy reload, the store's health); per label
  set (each backend on its own); only live workers count;
* ``policy_info`` and ``build_info`` are the union of their series (value 1): during a policy
  reload two versions may show until every worker has swapped.

Why not prometheus-client's multiprocess mode: it moves every counter increment onto an mmap
file under a lock (a cost on the hot path of each request), supports neither ``Info`` nor
``Gauge.set_function`` (``catalog_age_seconds`` is computed at scrape time), needs a writable
directory shared by the group and ``mark_process_dead`` bookkeeping; and the supervisor needs a
channel to each worker anyway (``/readyz`` of the group, revocations).

The supervisor's own series: :attr:`GroupMetrics.workers`, ``workers_running`` and
``worker_restarts_total`` (``docs/operations.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from gateway.observability.metrics import Metrics

__all__ = ["GAUGE_MERGE", "OPENMETRICS", "GaugeMerge", "GroupMetrics", "parse_exposition"]

GaugeMerge = Literal["sum", "min", "max"]

GAUGE_MERGE: Final[Mapping[str, GaugeMerge]] = {
    "mcp_gateway_in_flight": "sum",
    "mcp_gateway_max_in_flight": "sum",
    "mcp_gateway_exchanged_tokens": "sum",
    "mcp_gateway_upstream_connections": "max",
    "mcp_gateway_catalog_tools": "min",
    "mcp_gateway_catalog_age_seconds": "max",
    "mcp_gateway_catalog_collisions": "max",
    "mcp_gateway_catalog_held_items": "max",
    "mcp_gateway_backend_ready": "min",
    "mcp_gateway_policy_info": "max",
    "mcp_gateway_policy_last_reload_success": "min",
    "mcp_gateway_state_store_up": "min",
}
"""How each gauge of :class:`~gateway.observability.metrics.Metrics` combines across workers
(a test keeps this table complete)."""

OPENMETRICS: Final = "application/openmetrics-text; version=1.0.0; charset=utf-8"
"""The ``Accept`` header the supervisor scrapes its workers with (types survive the trip)."""

_SUMMED: Final = frozenset({"counter", "histogram", "summary"})
"""Summed across workers (and kept for exited ones); gauges follow GAUGE_MERGE, any other type
(info) is the union of its series."""

Key = tuple[str, tuple[tuple[str, str], ...]]
"""(sample name, sorted labels)."""


def parse_exposition(text: str) -> list[Metric]:
    """A worker's OpenMetrics exposition as metric families (``ValueError`` when malformed)."""
    return list(text_string_to_metric_families(text))  # type: ignore[no-untyped-call]


def _key(name: str, labels: Mapping[str, str]) -> Key:
    return name, tuple(sorted(labels.items()))


class _Family:
    __slots__ = ("doc", "name", "type", "values")

    def __init__(self, name: str, doc: str, type_: str) -> None:
        self.name = name
        self.doc = doc
        self.type = type_
        self.values: dict[Key, list[float]] = {}

    def add(self, key: Key, value: float) -> None:
        self.values.setdefault(key, []).append(value)

    def metric(self) -> Metric:
        rule: GaugeMerge = "sum" if self.type in _SUMMED else "max"
        if self.type == "gauge":
            rule = GAUGE_MERGE.get(self.name, "max")
        metric = Metric(self.name, self.doc, self.type)
        for (sample, labels), values in self.values.items():
            value = sum(values) if rule == "sum" else min(values) if rule == "min" else max(values)
            metric.add_sample(sample, dict(labels), value)
        return metric


class GroupMetrics:
    """The group's registry: the workers' merged families plus the supervisor's own series.

    :meth:`update` records a live worker's latest scrape, :meth:`retire` folds an exited
    worker's counters and histograms into the retired totals; :attr:`registry` is what the
    group's ``/metrics`` encodes (:meth:`exposition`).
    """

    def __init__(self, workers: int, version: str) -> None:
        self.listener = Metrics(version)
        """The supervisor's own ops listener's counters (connection refusals); its gauges are
        not the group's and are left out."""
        self._own = CollectorRegistry(auto_describe=True)
        self.workers = Gauge(
            "mcp_gateway_workers",
            "Worker processes configured (serve --workers)",
            registry=self._own,
        )
        self.workers.set(workers)
        self.workers_running = Gauge(
            "mcp_gateway_workers_running", "Worker processes running now", registry=self._own
        )
        self.worker_restarts_total = Counter(
            "mcp_gateway_worker_restarts",
            "Workers restarted after an unexpected exit",
            registry=self._own,
        )
        self._live: dict[str, list[Metric]] = {}
        self._retired: dict[str, _Family] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def update(self, member: str, families: Sequence[Metric]) -> None:
        """``member``'s latest families (a worker, by pid)."""
        self._live[member] = list(families)

    def retire(self, member: str) -> None:
        """``member`` exited: keep its counters and histograms, drop its gauges."""
        families = self._live.pop(member, None)
        for family in families or ():
            if family.type not in _SUMMED:
                continue
            retired = self._retired.get(family.name)
            if retired is None:
                retired = self._retired[family.name] = _Family(
                    family.name, family.documentation, family.type
                )
            for sample in family.samples:
                key = _key(sample.name, sample.labels)
                values = retired.values.setdefault(key, [0.0])
                values[0] += sample.value

    @property
    def members(self) -> list[str]:
        return list(self._live)

    def collect(self) -> Iterator[Metric]:
        merged: dict[str, _Family] = {}

        def add(families: Iterable[Metric], *, counters_only: bool = False) -> None:
            for family in families:
                if counters_only and family.type not in _SUMMED:
                    continue
                target = merged.get(family.name)
                if target is None:
                    target = merged[family.name] = _Family(
                        family.name, family.documentation, family.type
                    )
                if target.type != family.type:
                    continue  # a worker of another version; the first type seen wins
                for sample in family.samples:
                    target.add(_key(sample.name, sample.labels), sample.value)

        for families in self._live.values():
            add(families)
        add(self.listener.registry.collect(), counters_only=True)
        for name, retired in self._retired.items():
            target = merged.get(name)
            if target is None:
                target = merged[name] = _Family(name, retired.doc, retired.type)
            for key, values in retired.values.items():
                target.add(key, values[0])
        for family in merged.values():
            yield family.metric()
        yield from self._own.collect()

    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The group's ``/metrics`` body and Content-Type, negotiated like a single gateway's."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type
