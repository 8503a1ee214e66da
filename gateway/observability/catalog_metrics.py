"""``catalog_*`` and ``backend_ready``: each configured backend's catalog (its fetches, age,
size, hygiene, held items and collisions) and readiness; a backend's series exist from its
start, at zero (:meth:`CatalogMetrics.register`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from gateway.observability.collectors import Collectors
from gateway.observability.metric_labels import CATALOG_REFRESH_RESULTS, CATALOG_SANITISED_KINDS

__all__ = ["CatalogMetrics"]


class CatalogMetrics:
    """The catalog collectors, built by :class:`~gateway.observability.metrics.Metrics`."""

    def __init__(self, make: Collectors) -> None:
        self.tools = make.gauge("catalog_tools", "Tools in the backend's catalog", ("backend",))
        self.age_seconds = make.gauge(
            "catalog_age_seconds",
            "Seconds since the backend's last successful catalog fetch",
            ("backend",),
        )
        self.refresh_total = make.counter(
            "catalog_refresh_total",
            "Catalog refreshes by backend and result",
            ("backend", "result"),
        )
        self.sanitised_total = make.counter(
            "catalog_sanitised_total",
            "Catalog items the description hygiene changed (invisible, truncated) or hid "
            "(name_refused), counted once per item and change",
            ("backend", "kind"),
        )
        self.held_items = make.gauge(
            "catalog_held_items",
            "The backend's catalog items (kind: tool, prompt, template) that differ from the "
            "catalog lock: hidden under catalog.on_change: hold, served and flagged under warn",
            ("backend", "kind"),
        )
        self.lock_reloads_total = make.counter(
            "catalog_lock_reloads_total",
            "Reloads of the catalog lock file by result (a failed one keeps the old lock)",
            ("result",),
        )
        self.collisions = make.gauge(
            "catalog_collisions",
            "The backend's tools hidden because their exposed name is ambiguous (another "
            "backend offers the same name, or it lies in another backend's prefix)",
            ("backend",),
        )
        self.backend_ready = make.gauge(
            "backend_ready",
            "1 once the backend's first catalog fetch succeeded, else 0",
            ("backend",),
        )
        self._born = time.monotonic()

    def register(
        self,
        name: str,
        *,
        age: Callable[[], float] | None = None,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        """Create one configured backend's series (the names are bounded by the configuration).

        ``age``: seconds since its last successful catalog fetch; until the backend installs
        it (at start), the age counts from the process start: a catalog never fetched is as
        stale as it gets. ``ready``: whether its first fetch succeeded.
        """
        born = self._born
        self.age_seconds.labels(backend=name).set_function(
            age if age is not None else (lambda: time.monotonic() - born)
        )
        for result in CATALOG_REFRESH_RESULTS:
            self.refresh_total.labels(backend=name, result=result)
        self.tools.labels(backend=name)
        for kind in CATALOG_SANITISED_KINDS:
            self.sanitised_total.labels(backend=name, kind=kind)
        self.collisions.labels(backend=name)
        check = ready if ready is not None else (lambda: False)
        self.backend_ready.labels(backend=name).set_function(lambda: 1.0 if check() else 0.0)
