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
- Each positive entry also holds the token's revocation key
  (:mod:`gateway.state.revocation_key`: what the issuer signed), so a revocation finds every
  spelling of one token that was accepted (:meth:`TokenCache.forget_revoked`), and a hit can be
  checked against the revocation list.

:class:`~gateway.flights.SingleFlight` (re-exported here) makes concurrent lookups of one
uncached token share one introspection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from gateway.bounded import BoundedMap
from gateway.config import CacheConfig
from gateway.flights import SingleFlight
from gateway.seams import Principal

__all__ = [
    "FINGERPRINT_HEX",
    "CacheLookup",
    "SingleFlight",
    "TokenCache",
    "fingerprint_of",
    "token_digest",
]

FINGERPRINT_HEX: Final = 12
"""Hex characters of the SHA-256 digest used as the log fingerprint (48 bits: enough to
correlate log lines across replicas, far too few to test guesses of a high-entropy token)."""


def token_digest(token: str) -> tuple[bytes, str]:
    """(cache key, log fingerprint) of ``token``: its SHA-256 digest and the first 12 hex chars."""
    digest = hashlib.sha256(token.encode("ascii")).digest()
    return digest, fingerprint_of(digest)


def fingerprint_of(digest: bytes) -> str:
    """The log fingerprint of the token whose digest is ``digest``."""
    return digest.hex()[:FINGERPRINT_HEX]


@dataclass(frozen=True, slots=True)
class _Positive:
    principal: Principal
    revocation_key: bytes
    fresh_until: float
    keep_until: float
    """``fresh_until`` plus the stale-if-error allowance, capped at the effective expiry."""


@dataclass(frozen=True, slots=True)
class CacheLookup:
    """What the cache knows about a token right now."""

    principal: Principal | None = None
    """A fresh positive result."""
    revocation_key: bytes = b""
    """The revocation key of the token that ``principal`` was accepted for."""
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
        self._positive: BoundedMap[bytes, _Positive] = BoundedMap(
            settings.max_entries, on_drop=self._evicted
        )
        """Expiring at ``keep_until``; fresh until ``fresh_until``."""
        self._negative: BoundedMap[bytes, bool] = BoundedMap(settings.negative_max_entries)
        self._by_revocation: dict[bytes, set[bytes]] = {}
        """revocation key -> digests of the accepted spellings of that token."""

    def __len__(self) -> int:
        return len(self._positive) + len(self._negative)

    @property
    def negative_size(self) -> int:
        return len(self._negative)

    def lookup(self, key: bytes, now: float) -> CacheLookup:
        """A fresh result for ``key`` or a miss. O(1)."""
        entry = self._positive.peek(key, now)
        if entry is not None and now < entry.fresh_until:
            self._positive.touch(key)
            return CacheLookup(entry.principal, entry.revocation_key)
        if self._negative.peek(key, now) is not None:
            return _NEGATIVE
        return _MISS

    def stale(self, key: bytes, now: float) -> CacheLookup | None:
        """A positive result past its fresh lifetime but within stale-if-error (and its expiry)."""
        entry = self._positive.peek(key)
        if entry is None or now >= entry.keep_until or entry.principal.expired(now):
            return None
        return CacheLookup(entry.principal, entry.revocation_key)

    def store(
        self,
        key: bytes,
        principal: Principal,
        now: float,
        *,
        until: float | None = None,
        revocation_key: bytes | None = None,
    ) -> float | None:
        """Remember an accepted token until ``min(valid_until, now + max_ttl_s, until)`` (0
        disables); return that instant, or None when it is not cached. ``until``: the fresh
        lifetime of a result another replica introspected (sharing never extends it).
        ``revocation_key``: the token's (default: ``key``, an opaque token's)."""
        self._negative.pop(key)
        max_ttl = self._settings.max_ttl_s
        if max_ttl <= 0:
            return None
        valid_until = principal.valid_until
        fresh_until = min(valid_until, now + max_ttl, valid_until if until is None else until)
        if fresh_until <= now:
            return None
        keep_until = min(valid_until, fresh_until + self._settings.stale_if_error_s)
        revocation = key if revocation_key is None else revocation_key
        old = self._positive.peek(key)
        if old is not None and old.revocation_key != revocation:
            self._unindex(key, old.revocation_key)
        self._by_revocation.setdefault(revocation, set()).add(key)
        entry = _Positive(principal, revocation, fresh_until, keep_until)
        self._positive.put(key, entry, keep_until)  # the least recently used past the bound go
        return fresh_until

    def store_negative(self, key: bytes, now: float) -> None:
        """Remember a refused token for ``negative_ttl_s`` (default 5; 0 disables)."""
        ttl = self._settings.negative_ttl_s
        if ttl <= 0:
            return
        # A refusal supersedes an earlier acceptance (e.g. the token was revoked).
        self._drop_positive(key)
        self._negative.put(key, True, now + ttl)

    def forget(self, key: bytes) -> None:
        self._drop_positive(key)
        self._negative.pop(key)

    def forget_revoked(self, revocation_key: bytes) -> None:
        """Drop every accepted spelling of the token with this revocation key."""
        for key in list(self._by_revocation.get(revocation_key, ())):
            self._drop_positive(key)

    def clear(self) -> None:
        """Drop every entry (a signing key was removed from the issuer's key set)."""
        keys = list(self._positive)
        self._positive.clear()
        self._by_revocation.clear()
        self._negative.clear()
        for key in keys:
            self._dropped(key)

    def _drop_positive(self, key: bytes) -> None:
        entry = self._positive.pop(key)
        if entry is not None:
            self._evicted(key, entry)

    def _evicted(self, key: bytes, entry: _Positive) -> None:
        """An accepted token's entry left (evicted, expired or dropped)."""
        self._unindex(key, entry.revocation_key)
        self._dropped(key)

    def _unindex(self, key: bytes, revocation_key: bytes) -> None:
        spellings = self._by_revocation.get(revocation_key)
        if spellings is not None:
            spellings.discard(key)
            if not spellings:
                del self._by_revocation[revocation_key]

    def _dropped(self, key: bytes) -> None:
        if self._on_drop is not None:
            self._on_drop(key)
