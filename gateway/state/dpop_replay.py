"""DPoP proofs already seen (RFC 9449 §11.1: a ``jti`` is accepted once within its window).

Three :class:`gateway.seams.DpopReplays`: :class:`MemoryReplays` (this replica: ``state.backend:
memory``), :class:`RedisReplays` (every replica: one ``SET NX PXAT`` per proof under
``<prefix>dpop:<key hex>``, so a proof replayed at another replica is refused too) and
:class:`FallbackReplays` (Redis, and when Redis cannot answer in time
``state.on_store_error.dpop_replay``: ``deny`` (default) refuses with 503
``dpop_replay_unavailable``, ``local`` checks this replica's memory instead).

The key is the caller's (``gateway/auth``): a digest of what the proof's key signed, its RFC 7638
thumbprint and its ``jti``, never the proof's bytes (one signature has several encodings).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from gateway.bounded import BoundedMap
from gateway.config import StoreErrorPolicy
from gateway.errors import DpopReplayUnavailable
from gateway.observability.metrics import Metrics
from gateway.state.store import RedisStore, StoreUnavailable

__all__ = ["MAX_REMEMBERED", "FallbackReplays", "MemoryReplays", "RedisReplays"]

MAX_REMEMBERED: Final = 1_000_000
"""Proofs one replica remembers (about 100 MB); past it the oldest are forgotten first."""
RETRY_AFTER_S: Final = 1


class MemoryReplays:
    def __init__(
        self, *, max_entries: int = MAX_REMEMBERED, clock: Callable[[], float] = time.time
    ) -> None:
        self._seen: BoundedMap[bytes, bool] = BoundedMap(max_entries)
        """Proofs seen, expiring at the Unix time they may be forgotten; insertion order is
        (about) time order."""
        self._clock = clock

    def __len__(self) -> int:
        return len(self._seen)

    async def first_use(self, key: bytes, until: float) -> bool:
        return self.record(key, until)

    def record(self, key: bytes, until: float) -> bool:
        now = self._clock()
        if not self._seen.add(key, True, until, now):  # past the bound, the oldest goes
            return False
        self._seen.trim(now)  # and what has ended, from the oldest end
        return True


class RedisReplays:
    def __init__(self, store: RedisStore) -> None:
        self._store = store

    async def first_use(self, key: bytes, until: float) -> bool:
        """Raise StoreUnavailable when Redis cannot answer in time."""
        name = self._store.key("dpop", key.hex())
        at_ms = int(until * 1000) + 1
        stored = await self._store.call(lambda client: client.set(name, b"1", nx=True, pxat=at_ms))
        return bool(stored)


class FallbackReplays:
    def __init__(
        self,
        shared: RedisReplays,
        local: MemoryReplays,
        *,
        policy: StoreErrorPolicy,
        metrics: Metrics | None = None,
    ) -> None:
        self._shared = shared
        self._local = local
        self._policy = policy
        self._errors = (
            metrics.state_store_errors_total.labels(kind="dpop_replay") if metrics else None
        )

    async def first_use(self, key: bytes, until: float) -> bool:
        try:
            return await self._shared.first_use(key, until)
        except StoreUnavailable:
            if self._errors is not None:
                self._errors.inc()
            if self._policy == "deny":
                raise DpopReplayUnavailable(
                    retry_after=RETRY_AFTER_S, detail="dpop replay store unavailable"
                ) from None
            return self._local.record(key, until)
