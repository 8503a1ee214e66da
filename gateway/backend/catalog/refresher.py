"""The upstream tool catalog, kept fresh: fetch every ``tools/list`` page, swap, repeat.

MCP 2026-07-28 server/tools.mdx §Listing Tools and server/utilities/caching.mdx, client side.
The catalog is fetched at start and then:

* **on a timer**: every ``backend.catalog_refresh_s``; an advertised ``ttlMs`` may only shorten
  that, and never below :data:`TTL_FLOOR_S` (the official Python SDK's server says ``ttlMs: 0``,
  which taken literally means re-listing in a busy loop): see :func:`refresh_interval`;
* **on request** (:meth:`CatalogRefresher.request_refresh`): an upstream
  ``notifications/tools/list_changed`` or a ``-32602`` answer to a call (the catalog may be
  stale). Requests are coalesced: any number of them while a fetch runs, or within
  :data:`EARLY_REFRESH_GAP_S` of the last fetch's start, lead to one more fetch, never to none.

A catalog is replaced only by a successful fetch; a failed one keeps the last good catalog
(``catalog_age_seconds`` shows how stale it is) and is retried with backoff.

With a catalog lock (``catalog:``, :mod:`.lock_watch`) every fetch is compared with the lock
here, once per fetch and never per request: under ``on_change: hold`` an item that differs from
the lock, or is not in it, is left out of :meth:`CatalogRefresher.catalog` and
:meth:`CatalogRefresher.surface`, so listing, calls and the federation see it exactly as if the
backend did not offer it. The unfiltered snapshot is kept, so a new lock is applied at once
(:meth:`CatalogRefresher.relock`) without another fetch. Without a lock none of this runs.

The same fetch then lists what else the upstream advertised in its ``server/discover`` or
``initialize`` result: ``prompts/list`` (capability ``prompts``), ``resources/list`` and
``resources/templates/list`` (capability ``resources``), every page, validated by
:func:`~gateway.backend.catalog.surface_catalog.build_surface`. A failure there keeps the last good
prompts and resources (and is logged) without failing the tool catalog.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import Any, Final

from gateway.backend.catalog.held import lock_report, pin_surface, pin_tools, without_held
from gateway.backend.catalog.lock_watch import CatalogLock
from gateway.backend.catalog.pinning import Difference, Item, Key, OverrideSource, compare
from gateway.backend.catalog.surface_catalog import (
    EMPTY_PART,
    MAX_ITEMS,
    SurfacePart,
    build_surface,
)
from gateway.backend.catalog.tool_catalog import (
    DEFAULT_MAX_DESCRIPTION_CHARS,
    EMPTY_CATALOG,
    MAX_TOOLS,
    ToolCatalog,
    build_catalog,
)
from gateway.backend.upstream.link import UpstreamLink
from gateway.backend.upstream.list_pages import fetch_list, fetch_surface_lists
from gateway.backend.upstream.rpc import UpstreamFault
from gateway.background import Background
from gateway.config import BackendConfig
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.retry import sleep_or_wake

__all__ = [
    "EARLY_REFRESH_GAP_S",
    "MAX_RETRY_S",
    "TTL_FLOOR_S",
    "CatalogRefresher",
    "refresh_interval",
]

TTL_FLOOR_S: Final = 10.0
"""An advertised ``ttlMs`` shortens the refresh interval down to this, no further."""
EARLY_REFRESH_GAP_S: Final = 1.0
"""Least time between the starts of two fetches when a refresh is requested early."""
RETRY_S: Final = 1.0
"""First wait after a failed fetch; doubles up to :data:`MAX_RETRY_S`."""
MAX_RETRY_S: Final = 60.0
"""Longest wait between attempts while the upstream is down."""

_log = get_logger("gateway.backend")


def refresh_interval(configured_s: float, ttl_ms: int | None) -> float:
    """Seconds until the next timed fetch: ``catalog_refresh_s``, shortened by ``ttlMs`` to no
    less than :data:`TTL_FLOOR_S` (a configured interval below the floor is kept as is)."""
    if ttl_ms is None:
        return configured_s
    return min(configured_s, max(TTL_FLOOR_S, ttl_ms / 1000))


class CatalogRefresher:
    """Owns the catalog of one upstream: see the module docstring."""

    def __init__(
        self,
        link: UpstreamLink,
        settings: BackendConfig,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_description_chars: int = DEFAULT_MAX_DESCRIPTION_CHARS,
        pins: CatalogLock | None = None,
        overrides: OverrideSource | None = None,
    ) -> None:
        """``pins``: the catalog lock to hold changed items back by (None: no lock).
        ``overrides``: the policy set whose tool overrides are applied before hashing (with
        ``pins`` only; a new one arrives by :meth:`use_overrides`)."""
        self._link = link
        self._max_description_chars = max_description_chars
        self._tool_changes: frozenset[tuple[str, str, str]] = frozenset()
        self._surface_changes: frozenset[tuple[str, str, str]] = frozenset()
        self._settings = settings
        self._backend = settings.name
        self._metrics = metrics
        self._clock = clock
        self._catalog: ToolCatalog = EMPTY_CATALOG
        self._fetched_version = EMPTY_CATALOG.version
        self._surface: SurfacePart = EMPTY_PART
        self._catalog_at: float | None = None
        self._born = clock()
        self._started_at = -EARLY_REFRESH_GAP_S
        self.interval = settings.catalog_refresh_s
        """Seconds between timed fetches, as last computed by :func:`refresh_interval`."""
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task = Background(f"backend-catalog-refresh:{self._backend}")
        self.ready = False
        """True once the first fetch succeeded (readiness)."""
        self.surface_failed = False
        """The last fetch kept the previous prompts and templates (their lists failed)."""
        self.on_update: Callable[[], None] | None = None
        """Called after every successful fetch (the catalog or the interval may have changed)."""
        self._pins = pins
        # With a lock: the unfiltered snapshot, its pinned items, the last comparison.
        self._full_catalog: ToolCatalog = EMPTY_CATALOG
        self._full_surface: SurfacePart = EMPTY_PART
        self._overrides = overrides
        self._raw_tools: list[Any] = []
        self._live_tools: tuple[Item, ...] = ()
        self._tool_names: dict[Key, str] = {}
        self._live_surface: tuple[Item, ...] = ()
        self._differences: tuple[Difference, ...] = ()
        self._latest = overrides
        """The newest policy set pushed (:meth:`use_overrides`); ``_overrides``: the applied."""
        if pins is not None:
            pins.subscribe(self._backend, self.relock)

    def catalog(self) -> ToolCatalog:
        return self._catalog

    def use_overrides(self, source: OverrideSource) -> None:
        """A new policy set was swapped in (any thread, before the merge hears of it): its
        overrides are applied to the lock before this catalog's next use, so no request sees a
        changed override unheld. Until then :meth:`catalog` is a wrapper that re-pins once;
        otherwise a plain attribute read (no per-request cost). Without a lock: nothing."""
        if self._pins is None:
            return
        self._latest = source
        self.catalog = self._catalog_under_new_overrides  # type: ignore[method-assign]

    def _catalog_under_new_overrides(self) -> ToolCatalog:
        if self.ready:
            # Back to the plain method first: a push after this line installs the wrapper again.
            self.__dict__.pop("catalog", None)
            if self._latest is not self._overrides:
                self._apply_lock()
        return self._catalog

    def surface(self) -> SurfacePart:
        """The upstream's validated prompts, resources and templates (last good fetch)."""
        return self._surface

    def pinned(self) -> tuple[Item, ...]:
        """What this backend offers now, as lock items (with a lock; else empty)."""
        return self._live_tools + self._live_surface

    def differences(self) -> tuple[Difference, ...]:
        """The last comparison with the lock (with a lock; else empty)."""
        return self._differences

    def held_tools(self) -> frozenset[str]:
        """The tools ``catalog.on_change: hold`` leaves out of :meth:`catalog` now, by every name
        a policy rule may use for them (the exposed one and the catalog's)."""
        if self._pins is None or self._pins.mode != "hold":
            return frozenset()
        held = [d.key for d in self._differences if d.change != "removed" and d.key[0] == "tool"]
        names = self._tool_names
        return frozenset(name for key in held for name in (key[2], names.get(key, key[2])))

    def lock_report(self) -> dict[str, Any] | None:
        """The ``catalog_lock`` member of this backend's ``/readyz`` entry (None: no lock)."""
        return None if self._pins is None else lock_report(self._pins, self._differences)

    def relock(self) -> None:
        """Apply the current lock (and overrides) to the snapshot already fetched: after a
        lock reload, or a policy reload that may change an override. On the event loop."""
        if self._pins is None or not self.ready:
            return
        self._apply_lock()
        if self.on_update is not None:
            self.on_update()

    def age(self) -> float:
        """Seconds since the last successful fetch; before the first one, since this refresher
        was created (a catalog never fetched is as stale as it gets: CatalogStale fires)."""
        fetched = self._catalog_at if self._catalog_at is not None else self._born
        return self._clock() - fetched

    def start(self) -> None:
        """Run the refresh loop in the background (after the first :meth:`refresh`)."""
        self._task.start(self._loop)

    async def close(self) -> None:
        await self._task.close()

    def request_refresh(self) -> None:
        """Ask for a fetch soon (coalesced; see the module docstring)."""
        self._wake.set()

    async def refresh(self) -> bool:
        """Fetch every page and swap in the new catalog; False (last good kept) on failure."""
        async with self._lock:
            self._started_at = time.monotonic()
            try:
                tools, ttl_ms = await fetch_list(
                    self._link,
                    "tools/list",
                    "tools",
                    MAX_TOOLS,
                    timeout_s=self._settings.timeout_s,
                    backend=self._backend,
                )
            except UpstreamFault as fault:
                self._link.forget()  # detect the era again next time
                self._count("failure")
                _log.warning(
                    "backend_catalog_refresh_failed",
                    backend=self._backend,
                    kind=fault.kind,
                    status=fault.status,
                )
                return False
            build = build_catalog(
                tools,
                prefix=self._settings.name_prefix,
                backend=self._backend,
                max_description_chars=self._max_description_chars,
            )
            self._tool_changes = self._report(
                {("tool", name, kind) for name, kind in build.sanitised}, self._tool_changes
            )
            for name, reason in build.dropped:
                _log.warning(
                    "backend_tool_dropped", backend=self._backend, tool=name, reason=reason
                )
            changed = build.catalog.version != self._fetched_version or not self.ready
            self._fetched_version = build.catalog.version
            if changed:
                _log.info(
                    "backend_catalog_updated",
                    backend=self._backend,
                    version=build.catalog.version,
                    tools=len(build.catalog),
                    dropped=len(build.dropped),
                )
            if self._pins is None:
                if changed:
                    self._catalog = build.catalog
                await self._refresh_surface()
            else:
                self._full_catalog, self._raw_tools = build.catalog, tools
                await self._refresh_surface()
                self._apply_lock()
            if self._metrics is not None:
                self._metrics.catalog.tools.labels(backend=self._backend).set(len(self._catalog))
            self._catalog_at = self._clock()
            self.interval = refresh_interval(self._settings.catalog_refresh_s, ttl_ms)
            self._count("success")
            self.ready = True
        if self.on_update is not None:
            self.on_update()
        return True

    def _report(
        self, changes: set[tuple[str, str, str]], before: frozenset[tuple[str, str, str]]
    ) -> frozenset[tuple[str, str, str]]:
        """Log and count each hygiene change once: those the previous snapshot did not have
        (a refresh that finds the same text again says nothing)."""
        for item_kind, name, change in sorted(changes - before):
            _log.warning(
                "backend_catalog_sanitised",
                backend=self._backend,
                kind=item_kind,
                item=name,
                change=change,
            )
            if self._metrics is not None:
                self._metrics.catalog.sanitised_total.labels(
                    backend=self._backend, kind=change
                ).inc()
        return frozenset(changes)

    def _count(self, result: str) -> None:
        if self._metrics is not None:
            self._metrics.catalog.refresh_total.labels(backend=self._backend, result=result).inc()

    async def _refresh_surface(self) -> None:
        state = self._link.state
        offers = state.offers if state is not None else frozenset()
        subscribe = state is not None and state.subscribe
        if not offers & {"prompts", "resources"}:
            self._surface = self._full_surface = SurfacePart(offers=offers, subscribe=subscribe)
            self._live_surface = ()
            return
        try:
            prompts, resources, templates = await fetch_surface_lists(
                self._link,
                offers,
                MAX_ITEMS,
                timeout_s=self._settings.timeout_s,
                backend=self._backend,
            )
        except UpstreamFault as fault:
            _log.warning(
                "backend_surface_refresh_failed",
                backend=self._backend,
                kind=fault.kind,
                status=fault.status,
            )
            self.surface_failed = True
            return
        self.surface_failed = False
        part = build_surface(
            prompts,
            resources,
            templates,
            prefix=self._settings.name_prefix,
            backend=self._backend,
            max_description_chars=self._max_description_chars,
        )
        self._surface_changes = self._report(set(part.sanitised), self._surface_changes)
        for kind, name, reason in part.dropped:
            _log.warning(
                "backend_item_dropped", backend=self._backend, kind=kind, item=name, reason=reason
            )
        part = dataclasses.replace(part, offers=offers, subscribe=subscribe)
        if self._pins is None:
            self._surface = part
            return
        self._full_surface = part
        self._live_surface = pin_surface(self._backend, part, prompts, templates)

    def _apply_lock(self) -> None:
        """Compare the snapshot with the lock; under ``hold`` leave out what differs."""
        pins = self._pins
        assert pins is not None
        source = self._overrides = self._latest
        self._live_tools, self._tool_names = pin_tools(
            self._backend,
            self._raw_tools,
            self._full_catalog,
            source,
            max_description_chars=self._max_description_chars,
        )
        differences = compare(self.pinned(), pins.current().for_backend(self._backend))
        self._differences = differences
        catalog, surface = self._full_catalog, self._full_surface
        if pins.mode == "hold":
            catalog, surface = without_held(catalog, surface, differences, self._tool_names)
        if catalog.version != self._catalog.version:
            self._catalog = catalog
        self._surface = surface
        pins.report(self._backend, differences)

    async def _loop(self) -> None:
        retry = RETRY_S
        ok = self.ready
        while True:
            wait = self.interval if ok else retry
            await sleep_or_wake(self._wake, wait)
            gap = self._started_at + EARLY_REFRESH_GAP_S - time.monotonic()
            if gap > 0:
                await asyncio.sleep(gap)  # coalesce a burst of requests into one fetch
            # Cleared before fetching: a request arriving during the fetch causes one more.
            self._wake.clear()
            try:
                ok = await self.refresh()
            except Exception:  # a bug must not stop refreshing for good
                _log.exception("backend_catalog_refresh_crashed", backend=self._backend)
                ok = False
            retry = RETRY_S if ok else min(retry * 2, MAX_RETRY_S)
