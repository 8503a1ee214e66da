"""Introspection results shared by every replica (``state.share_token_cache: true``).

Implements :class:`gateway.seams.SharedTokenCache` over Redis. An accepted token is stored under
``<prefix>tc:<hex SHA-256 of the token>`` (never the token) as a small JSON document of the
principal's known fields (never pickle: a value read from Redis is data, validated field by
field) and expires at its ``fresh_until``, the same instant the replica that introspected it
stops trusting its own copy: a replica that reads the entry later keeps it only as long, so
sharing never stretches the revocation bound of ``issuer.cache.max_ttl_s``.

**Single flight across replicas.** A replica that misses both its own cache and the shared one
*claims* the token with ``SET <prefix>tcl:<hex> NX PX <hold>``. The winner introspects and
publishes the result (:meth:`~RedisTokenCache.put` writes the entry and drops the claim); every
other replica polls for the entry every :data:`POLL_S` while the claim stands, so concurrent
first requests on N replicas cost the issuer one introspection. If the winner gives up (the
issuer refused the token, failed, or the winner died: the claim expires after ``hold``), the
waiters introspect themselves.

Store faults never raise into a request: a failed read is a miss, a failed claim means "do it
yourself", a failed write is dropped; each is counted in
``mcp_gateway_state_store_errors_total{kind="token_cache"}``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import redis.asyncio as aioredis

from gateway.jsonkit.read import UNBOUNDED, JsonError, loads_object, peer_limits
from gateway.jsonkit.write import compact
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.seams import AUTH_METHODS, CachedPrincipal, Principal, frozen_claims
from gateway.state.store import RedisStore, StoreUnavailable

__all__ = [
    "BOUND_FORMAT_VERSION",
    "FORMAT_VERSION",
    "POLL_S",
    "RedisTokenCache",
    "decode_entry",
    "encode_entry",
]

FORMAT_VERSION: Final = 1
BOUND_FORMAT_VERSION: Final = 2
"""The format of an entry whose principal is DPoP-bound (``jkt``): a replica that predates the
binding refuses an entry of another version, so it can never read a bound token as bearer."""
POLL_S: Final = 0.02
"""How often a replica waiting for another one's introspection looks for the result."""
MAX_ENTRY_BYTES: Final = 16_384
_ENTRY_LIMITS: Final = peer_limits(UNBOUNDED)
"""An entry is bounded by :data:`MAX_ENTRY_BYTES`; its claims by the token's own reading."""
MAX_ACTOR_CHARS: Final = 256
"""``act.sub`` is bounded like ``sub`` by the claim checks (gateway/auth/claims.py)."""
MAX_SKEW_S: Final = 600
"""``issuer.clock_skew_s`` is at most 600 (the schema); a larger value in an entry is refused."""

T = TypeVar("T")
_log = get_logger("gateway.state")


def encode_entry(entry: CachedPrincipal) -> bytes:
    p = entry.principal
    document = {
        "v": FORMAT_VERSION if p.binding is None else BOUND_FORMAT_VERSION,
        "sub": p.subject,
        "client_id": p.client_id,
        "scopes": sorted(p.scopes),
        "exp": p.expires_at,
        "iss": p.issuer,
        "fp": p.fingerprint,
        "skew": p.skew_s,
        "until": entry.fresh_until,
        "am": p.auth_method,
        **({"act": p.actor} if p.actor is not None else {}),
        # SECURITY: the binding travels with the principal, or another replica would serve a
        # DPoP-bound token to a plain bearer request.
        **({"jkt": p.binding} if p.binding is not None else {}),
        # The token's claims, so a principal read on another replica is the same principal.
        # An entry past MAX_ENTRY_BYTES is a miss there (it re-checks the token itself).
        **({"claims": dict(p.claims)} if p.claims else {}),
    }
    return compact(document)


def decode_entry(raw: bytes, digest: bytes, now: float) -> CachedPrincipal | None:
    """The entry, or None when it is malformed, for another token, or no longer fresh."""
    if len(raw) > MAX_ENTRY_BYTES:
        return None
    try:
        doc = loads_object(raw, _ENTRY_LIMITS)
    except JsonError:
        return None
    if doc.get("v") not in (FORMAT_VERSION, BOUND_FORMAT_VERSION):
        return None
    sub, client_id, scopes = doc.get("sub"), doc.get("client_id"), doc.get("scopes")
    exp, iss, fp, until = doc.get("exp"), doc.get("iss"), doc.get("fp"), doc.get("until")
    skew = doc.get("skew")
    # "am" came with several issuers; an entry without it was introspected (older replica).
    method = doc.get("am", "introspection")
    actor = doc.get("act")
    binding = doc.get("jkt")
    claims = doc.get("claims", {})
    if not (
        isinstance(sub, str)
        and sub
        and (client_id is None or isinstance(client_id, str))
        and isinstance(scopes, list)
        and all(isinstance(scope, str) for scope in scopes)
        and isinstance(exp, int | float)
        and isinstance(until, int | float)
        and isinstance(skew, int | float)
        and _number(exp)
        and _number(until)
        and _number(skew)
        and 0 <= skew <= MAX_SKEW_S
        and isinstance(iss, str)
        # The fingerprint is derived from the digest: an entry copied to another key is refused.
        and isinstance(fp, str)
        and 8 <= len(fp) <= 64
        and digest.hex().startswith(fp)
        and method in AUTH_METHODS
        and (actor is None or (isinstance(actor, str) and 0 < len(actor) <= MAX_ACTOR_CHARS))
        and (binding is None) is (doc["v"] == FORMAT_VERSION)
        and (binding is None or (isinstance(binding, str) and 0 < len(binding) <= 128))
        and isinstance(claims, dict)
    ):
        return None
    if not now < until <= exp + skew:
        return None
    principal = Principal(
        subject=sub,
        client_id=client_id,
        scopes=frozenset(scopes),
        expires_at=float(exp),
        issuer=iss,
        fingerprint=fp,
        skew_s=float(skew),
        auth_method=method,
        actor=actor,
        binding=binding,
        claims=frozen_claims(claims),
    )
    return CachedPrincipal(principal, float(until))


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class RedisTokenCache:
    def __init__(
        self,
        store: RedisStore,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._clock = clock
        self._errors = (
            metrics.state_store_errors_total.labels(kind="token_cache") if metrics else None
        )

    def entry_key(self, digest: bytes) -> str:
        return self._store.key("tc", digest.hex())

    def _claim_key(self, digest: bytes) -> str:
        return self._store.key("tcl", digest.hex())

    async def _call(self, operation: Callable[[aioredis.Redis], Awaitable[T]]) -> T | None:
        try:
            return await self._store.call(operation)
        except StoreUnavailable:
            if self._errors is not None:
                self._errors.inc()
            return None

    async def get(self, digest: bytes) -> CachedPrincipal | None:
        key = self.entry_key(digest)
        raw = await self._call(lambda client: client.get(key))
        return self._decode(raw, digest)

    def _decode(self, raw: Any, digest: bytes) -> CachedPrincipal | None:
        if not isinstance(raw, bytes):
            return None
        entry = decode_entry(raw, digest, self._clock())
        if entry is None:
            _log.warning("shared_token_cache_entry_refused", token_fp=digest.hex()[:12])
        return entry

    async def claim(self, digest: bytes, hold_s: float) -> bool:
        key, hold_ms = self._claim_key(digest), max(1, round(hold_s * 1000))
        try:
            claimed = await self._store.call(
                lambda client: client.set(key, b"1", nx=True, px=hold_ms)
            )
        except StoreUnavailable:
            if self._errors is not None:
                self._errors.inc()
            return True  # "introspect yourself": never wait on a store that cannot answer
        return bool(claimed)

    async def wait(self, digest: bytes, timeout_s: float) -> CachedPrincipal | None:
        entry_key, claim_key = self.entry_key(digest), self._claim_key(digest)
        deadline = time.monotonic() + timeout_s

        async def look(client: aioredis.Redis) -> list[Any]:
            pipe = client.pipeline(transaction=False)
            pipe.get(entry_key)
            pipe.exists(claim_key)
            return list(await pipe.execute())

        while time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            found = await self._call(look)
            if found is None:
                return None
            raw, claimed = found
            if raw is not None:
                return self._decode(raw, digest)
            if not claimed:
                return None  # the other replica gave up: introspect ourselves
        return None

    async def put(self, digest: bytes, entry: CachedPrincipal) -> None:
        entry_key, claim_key = self.entry_key(digest), self._claim_key(digest)
        expire_ms = int(entry.fresh_until * 1000)
        value = encode_entry(entry)

        async def write(client: aioredis.Redis) -> None:
            pipe = client.pipeline(transaction=True)
            pipe.set(entry_key, value, pxat=expire_ms)
            pipe.delete(claim_key)
            await pipe.execute()

        if entry.fresh_until > self._clock():
            await self._call(write)
        else:
            await self.release(digest)

    async def release(self, digest: bytes) -> None:
        claim_key = self._claim_key(digest)
        await self._call(lambda client: client.delete(claim_key))
