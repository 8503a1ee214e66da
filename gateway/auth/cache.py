"""Introspection result cache (RFC 7662 §4 "caching") with single-flight coalescing.

- Keyed by the SHA-256 digest of the token (:func:`token_digest`), never by the token itself.
- A positive entry is fresh until ``min(valid_until, stored_at + max_ttl_s)``; ``max_ttl_s = 0``
  disables caching. It is never served past the token's effective expiry
  (:attr:`~gateway.seams.Principal.valid_until`: ``exp`` plus ``issuer.clock_skew_s``).
- With ``stale_if_error_s > 0`` a positive entry is kept ``stale_if_error_s`` past its fresh
  lifetime (still never past the effective expiry) so it can be served while the issuer is
  unreachable.
- Negative entries (a token the issuer or the claim checks refused) live ``negative_ttl_s``
  (5 s by default, 0 disables), so a retried bad token costs the issuer one introspection per
  interval; they are bounded separately (``negative_max_entries``), because an attacker
  controls how many distinct bad tokens arrive. A negative entry never extends a token's life:
  revocation only goes active to inactive, and a refusal drops a cached acceptance.
- Both maps are LRU, bounded by entry count.

:class:`~gateway.flights.SingleFlight` (re-exported here) makes concurrent lookups of one
uncached token share one introspection.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from gateway.config import CacheConfig
from gateway.flights import SingleFlight
from gateway.seams import Principal

__all__ = ["FINGERPRINT_HEX", "CacheLookup", "SingleFlight", "TokenCache", "token_digest"]

FINGERPRINT_HEX: Final = 12
"""Hex characters of the SHA-256 digest used as the log fingerprint (48 bits: enough to
correlate log lines across replicas, far too few to test guesses of a high-entropy token)."""


def token_digest(token: str) -> tuple[bytes, str]:
    """(cache key, log fingerprint) of ``token``: its SHA-256 digest and the first 12 hex chars."""
    digest = hashlib.sha256(token.encode("ascii")).digest()
    return digest, digest.hex()[:FINGERPRINT_HEX]


@dataclass(frozen=True, slots=True)
class _Positive:
    principal: Principal
    fresh_until: float
    keep_until: float
    """``fresh_until`` plus the stale-if-error allowance, capped at the effective expiry."""


@dataclass(frozen=True, slots=True)
class CacheLookup:
    """What the cache knows about a token right now."""

    principal: Principal | None = None
    """A fresh positive result."""
    negative: bool = False
    """A fresh negative result (answer 401 without asking the issuer)."""


_MISS: Final = CacheLookup()
_NEGATIVE: Final = CacheLookup(negative=True)


class TokenCache:
    """Bounded LRU maps of positive and negative introspection outcomes, keyed by digest."""

    def __init__(
        self, settings: CacheConfig, *, on_drop: Callable[[bytes], None] | None = None
    ) -> None:
        """``on_drop(digest)``: an accepted token's entry left the cache (expired, evicted,
        forgotten, superseded by a refusal); what was derived from it goes too (exchanged
        tokens, reusable assertions)."""
        if settings.max_ttl_s < 0 or settings.negative_ttl_s < 0 or settings.stale_if_error_s < 0:
            raise ValueError("cache TTLs must be >= 0 (0 disables)")
        if settings.max_entries < 1 or settings.negative_max_entries < 1:
            raise ValueError("cache max_entries and negative_max_entries must be >= 1")
        self._settings = settings
        self._on_drop = on_drop
        self._positive: OrderedDict[bytes, _Positive] = OrderedDict()
        self._negative: OrderedDict[bytes, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._positive) + len(self._negative)

    @property
    def negative_size(self) -> int:
        return len(self._negative)

    def lookup(self, key: bytes, now: float) -> CacheLookup:
        """A fresh result for ``key`` or a miss. O(1)."""
        entry = self._positive.get(key)
        if entry is not None:
            if now < entry.fresh_until:
                self._positive.move_to_end(key)
                return CacheLookup(principal=entry.principal)
            if now >= entry.keep_until:
                del self._positive[key]
                self._dropped(key)
        negative_until = self._negative.get(key)
        if negative_until is not None:
            if now < negative_until:
                return _NEGATIVE
            del self._negative[key]
        return _MISS

    def stale(self, key: bytes, now: float) -> Principal | None:
        """A positive result past its fresh lifetime but within stale-if-error (and its expiry)."""
        entry = self._positive.get(key)
        if entry is None or now >= entry.keep_until or entry.principal.expired(now):
            return None
        return entry.principal

    def store(
        self, key: bytes, principal: Principal, now: float, *, until: float | None = None
    ) -> float | None:
        """Remember an accepted token until ``min(valid_until, now + max_ttl_s, until)`` (0
        disables); return that instant, or None when it is not cached. ``until``: the fresh
        lifetime of a result another replica introspected (sharing never extends it)."""
        self._negative.pop(key, None)
        max_ttl = self._settings.max_ttl_s
        if max_ttl <= 0:
            return None
        valid_until = principal.valid_until
        fresh_until = min(valid_until, now + max_ttl, valid_until if until is None else until)
        if fresh_until <= now:
            return None
        keep_until = min(valid_until, fresh_until + self._settings.stale_if_error_s)
        self._positive[key] = _Positive(principal, fresh_until, keep_until)
        self._positive.move_to_end(key)
        while len(self._positive) > self._settings.max_entries:
            self._dropped(self._positive.popitem(last=False)[0])
        return fresh_until

    def store_negative(self, key: bytes, now: float) -> None:
        """Remember a refused token for ``negative_ttl_s`` (default 5; 0 disables)."""
        ttl = self._settings.negative_ttl_s
        if ttl <= 0:
            return
        # A refusal supersedes an earlier acceptance (e.g. the token was revoked).
        if self._positive.pop(key, None) is not None:
            self._dropped(key)
        self._negative[key] = now + ttl
        self._negative.move_to_end(key)
        while len(self._negative) > self._settings.negative_max_entries:
            self._negative.popitem(last=False)

    def forget(self, key: bytes) -> None:
        if self._positive.pop(key, None) is not None:
            self._dropped(key)
        self._negative.pop(key, None)

    def clear(self) -> None:
        """Drop every entry (a signing key was removed from the issuer's key set)."""
        keys = list(self._positive)
        self._positive.clear()
        self._negative.clear()
        for key in keys:
            self._dropped(key)

    def _dropped(self, key: bytes) -> None:
        if self._on_drop is not None:
            self._on_drop(key)
