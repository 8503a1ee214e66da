"""The one bounded map: at most ``max_entries``, least recently used out first, and an optional
expiry per entry. Every cache and replay store of the gateway is one (imports nothing from the
gateway, so every layer may use it).

Why not ``cachetools`` 8.0: its ``TTLCache`` keeps one lifetime for every entry, where these
caches give each entry its own (a token's ``exp``, a proof's window); its ``TLRUCache``, which
does, costs 0.96 us per read and 2.2 us per read and write, ``LRUCache`` 0.19 and 0.38 us, this
map (an ``OrderedDict`` underneath, whose reordering is C) 0.11 and 0.25 us (in-process, CPU
time; a read through :meth:`BoundedMap.peek` costs about 0.03 us more since), on paths that run
for every request (the token cache, the rate limiter).

Expiry is checked when an entry is read (``now`` given) and by :meth:`BoundedMap.expire`; an
expired or evicted entry is handed to ``on_drop`` (not one removed by :meth:`pop` or
:meth:`clear`), so whatever was derived from it can go too.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Final, Generic, TypeVar

__all__ = ["NEVER", "BoundedMap"]

K = TypeVar("K")
V = TypeVar("V")

NEVER: Final = math.inf
"""The expiry of an entry that only eviction removes."""
_NO_CLOCK: Final = -math.inf


class BoundedMap(Generic[K, V]):
    """A least-recently-used map of at most ``max_entries`` entries (module docstring)."""

    __slots__ = ("_entries", "_max", "_on_drop")

    def __init__(self, max_entries: int, *, on_drop: Callable[[K, V], None] | None = None) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self._entries: OrderedDict[K, tuple[V, float]] = OrderedDict()
        self._max = max_entries
        self._on_drop = on_drop

    @property
    def max_entries(self) -> int:
        return self._max

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        """Present, expired or not (:meth:`get` with ``now`` decides freshness)."""
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        """Keys, least recently used first."""
        return iter(self._entries)

    def get(self, key: K, now: float = _NO_CLOCK) -> V | None:
        """The value, now the most recently used; None when absent or expired at ``now``
        (an expired entry is dropped). Values are never None."""
        value = self.peek(key, now)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def peek(self, key: K, now: float = _NO_CLOCK) -> V | None:
        """:meth:`get` without making the entry the most recently used."""
        found = self._entries.get(key)
        if found is None:
            return None
        if now >= found[1]:
            self._drop(key, found[0])
            return None
        return found[0]

    def touch(self, key: K) -> None:
        """Make ``key`` the most recently used (it must be present)."""
        self._entries.move_to_end(key)

    def put(self, key: K, value: V, expires_at: float = NEVER) -> None:
        """Set ``key`` (the most recently used now); the least recently used entries go past
        ``max_entries``."""
        entries = self._entries
        entries[key] = (value, expires_at)
        entries.move_to_end(key)
        if len(entries) > self._max:
            on_drop = self._on_drop
            while len(entries) > self._max:
                old, (dropped, _) = entries.popitem(last=False)
                if on_drop is not None:
                    on_drop(old, dropped)

    def add(self, key: K, value: V, expires_at: float, now: float) -> bool:
        """:meth:`put` unless ``key`` is present and not expired at ``now`` (then nothing
        changes); whether it was put. A first-use record in one lookup (a replay store)."""
        found = self._entries.get(key)
        if found is not None:
            if now < found[1]:
                return False
            self._drop(key, found[0])
        self.put(key, value, expires_at)
        return True

    def pop(self, key: K) -> V | None:
        """Remove ``key`` without ``on_drop``; its value, or None."""
        found = self._entries.pop(key, None)
        return None if found is None else found[0]

    def expire(self, now: float) -> int:
        """Drop every entry expired at ``now`` (a sweep; reads drop expired entries anyway);
        how many went."""
        expired = [(key, value) for key, (value, until) in self._entries.items() if now >= until]
        for key, value in expired:
            self._drop(key, value)
        return len(expired)

    def trim(self, now: float) -> None:
        """Drop expired entries from the least recently used end, up to the first that is not:
        O(what went), for maps whose order is about their expiry order (no reads refresh)."""
        entries = self._entries
        while entries:
            key = next(iter(entries))
            value, until = entries[key]
            if now < until:
                return
            self._drop(key, value)

    def clear(self) -> None:
        """Remove every entry without ``on_drop``."""
        self._entries.clear()

    def _drop(self, key: K, value: V) -> None:
        del self._entries[key]
        if self._on_drop is not None:
            self._on_drop(key, value)
