"""The catalog lock a replica serves by (``catalog:``): loaded at start, hot-reloaded, and the
one place where a difference from it is logged, audited and counted.

Every replica watches its own copy of the file (a mounted ConfigMap, a file in the image) with
the one file watcher (:mod:`gateway.filewatch`): a cheap stat signature (mtime, size, inode) is
compared every ``catalog.poll_s``; when it changed, the file is parsed and checked in a worker
thread, and only a valid lock replaces the current
one (one attribute assignment). An invalid file keeps the old lock, is logged with its
``file:line`` problems and counted (``catalog_lock_reloads_total{result="failure"}``). After a
swap every backend's refresher re-applies the lock to the catalog it already has (no upstream
fetch), so an approved item is served within one poll.

The refreshers call :meth:`CatalogLock.report` with each comparison; a difference is reported
once when it appears (and again when its live definition changes), and once when it is gone
(``catalog_item_released``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from gateway.backend.catalog.lock_file import FORMAT_VERSION, OUTDATED, Lock, load_lock
from gateway.backend.catalog.pinning import KINDS, Difference, Key
from gateway.config import OnChange
from gateway.errors import ConfigError
from gateway.filewatch import FileWatch, Signature, stat_signature
from gateway.observability.audit import CatalogEvent
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics

__all__ = ["CatalogLock"]

MAX_LOGGED_PROBLEMS: Final = 20

_log = get_logger("gateway.catalog")


class CatalogLock:
    """The current :class:`~gateway.backend.catalog.lock_file.Lock` and the ``on_change`` mode.

    The constructor loads the file and raises :class:`ConfigError` (``file:line:col``) when it
    is missing or invalid: a gateway configured with a lock never serves without one.
    ``lock``: a lock already loaded (``catalog diff``/``approve``/``pin``; nothing is read).
    """

    def __init__(
        self,
        path: Path,
        mode: OnChange,
        *,
        metrics: Metrics | None = None,
        audit: Callable[[CatalogEvent, float], None] | None = None,
        lock: Lock | None = None,
    ) -> None:
        self.path = path
        self.mode: OnChange = mode
        self._metrics = metrics
        self._audit = audit
        self._watch = FileWatch(self.signature, self._read, self.swap)
        if lock is None:
            lock = load_lock(path)
            _warn_outdated(lock)
        self._lock = lock
        self._listeners: list[Callable[[], None]] = []
        self._reported: dict[str, dict[Key, Difference]] = {}

    def current(self) -> Lock:
        return self._lock

    def subscribe(self, backend: str, relock: Callable[[], None]) -> None:
        """``relock`` runs (on the event loop) after every swap of the lock."""
        self._listeners.append(relock)
        self._reported.setdefault(backend, {})
        if self._metrics is not None and self.mode != "allow":
            for kind in KINDS:
                self._metrics.catalog.held_items.labels(backend=backend, kind=kind).set(0)

    # --- reload -----------------------------------------------------------------------

    def signature(self) -> Signature:
        return stat_signature((self.path,))

    def changed(self) -> bool:
        return self._watch.changed()

    def load(self) -> Lock | list[str]:
        """Read the file now (any thread): the lock, or the problems (the old lock stays)."""
        return self._watch.load()

    def _read(self) -> Lock | list[str]:
        try:
            return load_lock(self.path)
        except ConfigError as exc:
            return list(exc.problems)
        except Exception as exc:  # a loader bug must not take the old lock down
            return [f"{self.path}: internal error while loading the lock ({type(exc).__name__})"]

    def swap(self, loaded: Lock | list[str]) -> bool:
        """Install a loaded lock (on the event loop) and re-apply it everywhere; False when
        ``loaded`` is a list of problems or the same content."""
        if isinstance(loaded, list):
            self._count("failure")
            _log.error(
                "catalog.lock_reload_failed",
                path=str(self.path),
                problems=loaded[:MAX_LOGGED_PROBLEMS],
                problem_count=len(loaded),
            )
            return False
        if loaded.version == self._lock.version:
            return False
        self._lock = loaded
        self._count("success")
        _log.info(
            "catalog.lock_reloaded",
            path=str(self.path),
            version=loaded.version,
            items=len(loaded.items),
        )
        _warn_outdated(loaded)
        for relock in self._listeners:
            try:
                relock()
            except Exception:  # one backend's bug must not keep the others on the old lock
                _log.exception("catalog.relock_failed")
        return True

    async def reload(self) -> bool:
        """Read the file now (in a worker thread) and swap it in when valid and new (SIGHUP)."""
        return await self._watch.reload()

    async def run(self, poll_s: float) -> None:
        """Poll every ``poll_s`` seconds (``<= 0``: never) until cancelled."""
        await self._watch.run(poll_s)

    def _count(self, result: str) -> None:
        if self._metrics is not None:
            self._metrics.catalog.lock_reloads_total.labels(result=result).inc()

    # --- reporting --------------------------------------------------------------------

    def report(self, backend: str, differences: Sequence[Difference]) -> None:
        """One backend's comparison after a refresh or a relock: log, audit and count what is
        new since the last one (``allow``: nothing; ``/readyz`` and ``catalog diff`` show it)."""
        if self.mode == "allow":
            return
        held = self.mode == "hold"
        now = {d.key: d for d in differences if d.change != "removed"}
        before = self._reported.get(backend, {})
        self._reported[backend] = now
        event = "catalog_item_held" if held else "catalog_item_flagged"
        for key, difference in now.items():
            seen = before.get(key)
            live = difference.live
            if (
                seen is not None
                and seen.live is not None
                and live is not None
                and (seen.live.sha256, seen.change) == (live.sha256, difference.change)
            ):
                continue  # reported already
            self._emit(event, difference)
        for key in before.keys() - now.keys():
            self._emit("catalog_item_released", before[key], released=True)
        if self._metrics is not None:
            counts: dict[str, int] = dict.fromkeys(KINDS, 0)
            for kind, _, _ in now:
                counts[kind] += 1
            for kind, count in counts.items():
                self._metrics.catalog.held_items.labels(backend=backend, kind=kind).set(count)

    def _emit(self, event: str, difference: Difference, *, released: bool = False) -> None:
        kind, backend, name = difference.key
        live = difference.live.sha256 if difference.live is not None else None
        locked = difference.locked.sha256 if difference.locked is not None else None
        fields = {
            "backend": backend,
            "kind": kind,
            "item": name,
            "change": difference.change,
            "sha256": live,
            "locked_sha256": locked,
        }
        if released:
            _log.info("catalog.item_released", **fields)
        else:
            _log.warning(
                "catalog.item_held" if self.mode == "hold" else "catalog.item_flagged", **fields
            )
        if self._audit is not None:
            self._audit(
                CatalogEvent(
                    event, backend, kind, name, difference.change, live, locked, self._lock.version
                ),
                time.time(),
            )


def _warn_outdated(lock: Lock) -> None:
    if lock.format != FORMAT_VERSION:
        _log.warning("catalog.lock_outdated", path=lock.source, format=lock.format, detail=OUTDATED)
