"""In-process rate limiter (sliding window over two fixed windows) and concurrency slots."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Final

from gateway.bounded import BoundedMap

__all__ = ["MemoryLeases", "MemoryRateLimiter", "Slots", "retry_after_seconds", "window_wait"]

MAX_KEYS: Final = 100_000
"""Tracked keys per limiter; the least recently used key is forgotten past this (bounded memory)."""


class MemoryRateLimiter:
    """Approximate sliding window: the previous window's count is weighted by its overlap.

    Implements :class:`gateway.seams.RateLimiter`. O(1) per hit, bounded memory (LRU of keys).
    """

    def __init__(self, *, max_keys: int = MAX_KEYS, clock: Callable[[], float] = time.monotonic):
        self._windows: BoundedMap[str, tuple[int, int, int]] = BoundedMap(max_keys)
        """key -> (window index, count in that window, count in the previous window)"""
        self._clock = clock

    async def hit(self, key: str, count: int, per_s: float) -> float | None:
        return self.hit_now(key, count, per_s)

    def hit_now(self, key: str, count: int, per_s: float) -> float | None:
        now = self._clock()
        index = int(now // per_s)
        found = self._windows.peek(key)
        window, current, previous = (index, 0, 0) if found is None else found
        if window != index:
            previous = current if window == index - 1 else 0
            current = 0
        elapsed = (now - index * per_s) / per_s
        estimated = previous * (1.0 - elapsed) + current
        if estimated + 1 > count:
            self._windows.put(key, (index, current, previous))
            return max(window_wait(now, per_s, current, previous, count), 0.001)
        self._windows.put(key, (index, current + 1, previous))
        return None


def window_wait(now: float, per_s: float, current: int, previous: int, count: int) -> float:
    """Time until one more event fits under ``count``, for a refused hit (the same arithmetic as
    :data:`gateway.limits.redis.RATE_SCRIPT`).

    While this window alone has room, the wait is until the previous window's weighted count has
    decayed enough. When this window alone is full, no wait inside it helps: its count becomes
    the next window's ``previous`` and must decay in turn (waiting only for the window's end
    promised a ``Retry-After`` that was then refused again).
    """
    index = int(now // per_s)
    if current + 1 <= count and previous > 0:
        estimated = previous * (1.0 - (now - index * per_s) / per_s) + current
        return (estimated + 1 - count) / previous * per_s
    excess = (current + 1 - count) / current if current > 0 else 1.0
    return (index + 1) * per_s - now + excess * per_s


class Slots:
    """Counting concurrency caps per key (e.g. in-flight per subject and tool)."""

    def __init__(self) -> None:
        self._used: dict[str, int] = {}

    def try_acquire(self, key: str, limit: int) -> bool:
        used = self._used.get(key, 0)
        if used >= limit:
            return False
        self._used[key] = used + 1
        return True

    def release(self, key: str) -> None:
        used = self._used.get(key, 0) - 1
        if used <= 0:
            self._used.pop(key, None)
        else:
            self._used[key] = used

    def in_use(self, key: str) -> int:
        return self._used.get(key, 0)


class _SlotLease:
    __slots__ = ("_key", "_released", "_slots")

    def __init__(self, slots: Slots, key: str) -> None:
        self._slots, self._key, self._released = slots, key, False

    async def release(self) -> None:
        if not self._released:  # idempotent: a double release must not free someone else's slot
            self._released = True
            self._slots.release(self._key)


class MemoryLeases:
    """Implements :class:`gateway.seams.ConcurrencyLimiter` for one replica (``hold_s`` unused:
    a slot cannot outlive the process that holds it)."""

    def __init__(self) -> None:
        self.slots = Slots()

    async def acquire(self, key: str, limit: int, hold_s: float) -> _SlotLease | None:
        if not self.slots.try_acquire(key, limit):
            return None
        return _SlotLease(self.slots, key)


def retry_after_seconds(wait: float) -> int:
    """``Retry-After`` is whole seconds (RFC 9110 §10.2.3); never 0 for a real wait."""
    return max(1, math.ceil(wait))
