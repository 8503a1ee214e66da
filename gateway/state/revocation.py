"""Tokens revoked at the gateway, by revocation key, on every replica.

A revocation key (``gateway/state/revocation_key.py``) is 32 bytes naming what the issuer signed:
for a JWT its issuer and ``jti`` (else its signing input), so every spelling of one token
(ECDSA's ``(r, n - s)``, base64url variants) is one key; for an opaque token its SHA-256. This
module only stores and spreads keys; it never sees a token.

:class:`RevocationList` implements :class:`gateway.seams.Revocations` (the auth layer asks
:meth:`~RevocationList.revoked` before it accepts a token that was not in its cache) and carries
out revocations (:meth:`~RevocationList.revoke`, called by ``POST /admin/revoke``):

1. the key goes into this replica's own list until the later of ``now +
   admin.revocation_ttl_s`` and ``at_least`` (for a JWT: its ``exp`` plus the issuer's skew,
   bounded by the issuer's ``max_token_lifetime_s``; worked out by the admin API) and
   ``on_revoke`` evicts every spelling of the token from every cache of this replica:
   revocation works without Redis;
2. with Redis, one transaction adds a marker to the sorted set ``<prefix>revoked`` (member: the
   key's hex, score: the Unix time it expires), drops expired markers, deletes the shared
   introspection result of an opaque token, and publishes the key on the channel
   ``<prefix>revocations``.

Every replica subscribes to that channel (:meth:`~RevocationList.run`) and applies each message
the same way (list + ``on_revoke``), within milliseconds. Pub/sub is at-most-once, so the
markers cover what a replica missed: after every (re)subscription (start, restart, lost
connection) it reads all live markers and writes back (and broadcasts) the live revocations it
knows that have no marker: a Redis restarted without persistence gets them back from the
replicas still running, and a revocation Redis could not take reaches the others once it is
back. :meth:`~RevocationList.revoked` consults the marker set for every token it has not
cached. A marker lives as long as the revocation (at least ``admin.revocation_ttl_s``, which is
at least as long as any replica may hold the token in its cache, checked at configuration load;
for a JWT until it expires).

When Redis cannot answer in time, :meth:`revoked` follows ``state.on_store_error.revocation``:
``local`` trusts this replica's own list, ``deny`` raises :class:`RevocationUnavailable` (503).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from gateway.config import StoreErrorPolicy
from gateway.errors import RevocationUnavailable
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.state.store import RedisStore, StoreUnavailable

__all__ = ["DIGEST_BYTES", "MAX_LOCAL", "RevocationList"]

DIGEST_BYTES: Final = 32
MAX_LOCAL: Final = 100_000
"""Revocations remembered per replica (the oldest expiring first past this)."""
REVOCATION_RETRY_AFTER_S: Final = 1
RESEED_CHUNK: Final = 500
"""Markers written back per round trip after a (re)subscription (see ``_catch_up``)."""

MARK_SCRIPT: Final = """
for i = 3, #ARGV, 2 do
  redis.call('ZADD', KEYS[1], 'GT', ARGV[i + 1], ARGV[i])
  redis.call('PUBLISH', ARGV[2], ARGV[i] .. ':' .. ARGV[i + 1])
end
for i = 2, #KEYS do
  redis.call('DEL', KEYS[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('EXPIREAT', KEYS[1], math.ceil(tonumber(last[2])) + 1)
end
return 1
"""
"""KEYS[1]: the marker set; KEYS[2..]: shared-cache entries to delete. ARGV[1]: now (Unix s);
ARGV[2]: the channel; ARGV[3..]: pairs of digest hex and the Unix time the revocation ends.
Adds (or lengthens) each marker and broadcasts it, drops ended markers, and lets the set expire
with its last marker. One atomic round trip, Redis 6.2+ (no EXPIRE GT/NX, which need 7.0)."""

_log = get_logger("gateway.state")


class RevocationList:
    def __init__(
        self,
        *,
        ttl_s: float,
        on_revoke: Callable[[bytes], None],
        store: RedisStore | None = None,
        policy: StoreErrorPolicy = "local",
        token_cache_key: Callable[[bytes], str] | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ttl_s = ttl_s
        self._on_revoke = on_revoke
        self._store = store
        self._policy = policy
        self._token_cache_key = token_cache_key
        self._metrics = metrics
        self._clock = clock
        self._local: dict[bytes, float] = {}
        """digest -> Unix time the revocation ends."""
        if store is not None:
            self._set = store.key("revoked")
            self.channel = store.key("revocations")
            self._script = store.client.register_script(MARK_SCRIPT)

    def __len__(self) -> int:
        return len(self._local)

    # --- the auth layer's question ---------------------------------------------------------

    def revoked_locally(self, digest: bytes) -> bool:
        until = self._local.get(digest)
        if until is None:
            return False
        if self._clock() < until:
            return True
        del self._local[digest]
        return False

    async def revoked(self, digest: bytes) -> bool:
        """Whether ``digest`` is revoked (see the module docstring for the store-error rule)."""
        if self.revoked_locally(digest):
            return True
        if self._store is None:
            return False
        member = digest.hex()
        try:
            score = await self._store.call(lambda client: client.zscore(self._set, member))
        except StoreUnavailable:
            if self._metrics is not None:
                self._metrics.state_store_errors_total.labels(kind="revocation").inc()
            if self._policy == "deny":
                raise RevocationUnavailable(
                    retry_after=REVOCATION_RETRY_AFTER_S, detail="revocation store unavailable"
                ) from None
            return self.revoked_locally(digest)
        if score is not None and float(score) > self._clock():
            self._remember(digest, float(score))
            return True
        # A broadcast applied while Redis answered counts too. Nothing awaits after this line,
        # so a caller that stores the token right after a False answer cannot miss one.
        return self.revoked_locally(digest)

    # --- revoking --------------------------------------------------------------------------

    async def revoke(self, digest: bytes, at_least: float = 0.0) -> tuple[float, bool]:
        """Revoke the key ``digest`` here and (with Redis) everywhere until the later of ``now +
        ttl_s`` and ``at_least``; return (until, shared).

        ``shared`` is False when Redis could not take the revocation: this replica refuses the
        token anyway, the caller reports that the others were not reached.
        """
        if len(digest) != DIGEST_BYTES:
            raise ValueError("a revocation needs the full 32-byte revocation key")
        until = max(self._clock() + self.ttl_s, at_least)
        self._apply(digest, until)
        if self._store is None:
            return until, True
        try:
            await self._mark({digest: until})
        except StoreUnavailable:
            _log.error("token_revocation_not_shared", token_fp=digest.hex()[:12])
            return until, False
        return until, True

    def adopt(self, digest: bytes, until: float) -> bool:
        """Apply a revocation decided elsewhere (the supervisor of ``serve --workers N`` fans
        one out to every worker): list + ``on_revoke``, nothing sent to Redis. False when it has
        already ended or the digest is malformed."""
        if len(digest) != DIGEST_BYTES or until <= self._clock():
            return False
        self._apply(digest, until)
        return True

    # --- receiving -------------------------------------------------------------------------

    async def run(self) -> None:
        """Apply every replica's revocations until cancelled (Redis only)."""
        if self._store is None:
            return
        await self._store.listen(self.channel, self._received, on_connect=self._catch_up)

    def _received(self, data: bytes) -> None:
        member, _, until_text = data.decode("ascii", "replace").partition(":")
        try:
            digest = bytes.fromhex(member)
            until = float(until_text)
        except ValueError:
            _log.warning("token_revocation_malformed")
            return
        if len(digest) == DIGEST_BYTES and digest not in self._local:
            self._apply(digest, until)
            _log.info("token_revocation_applied", token_fp=member[:12], source="broadcast")

    async def _catch_up(self) -> None:
        """Read every live marker (what this replica may have missed while not subscribed),
        then write back the live revocations this replica knows and Redis does not: a Redis
        restarted without persistence lost its markers (a replica started after it would accept
        those tokens again), and a revocation taken while Redis was down reached one replica."""
        assert self._store is not None
        now = self._clock()
        markers: list[Any] = list(
            await self._store.call(
                lambda client: client.zrangebyscore(self._set, now, "+inf", withscores=True)
            )
        )
        known: set[bytes] = set()
        for member, score in markers:
            try:
                text = member.decode("ascii") if isinstance(member, bytes) else str(member)
                digest = bytes.fromhex(text)
            except (UnicodeDecodeError, ValueError):
                continue
            known.add(digest)
            if len(digest) == DIGEST_BYTES and digest not in self._local:
                self._apply(digest, float(score))
        missing = [(d, until) for d, until in self._local.items() if until > now and d not in known]
        for start in range(0, len(missing), RESEED_CHUNK):
            await self._mark(dict(missing[start : start + RESEED_CHUNK]))
        _log.info("token_revocations_synced", markers=len(markers), reseeded=len(missing))

    async def _mark(self, revocations: dict[bytes, float]) -> None:
        """Markers and broadcasts for ``revocations`` (digest -> end), one round trip
        (:data:`MARK_SCRIPT`); raise StoreUnavailable."""
        assert self._store is not None
        cache_keys = (
            [self._token_cache_key(d) for d in revocations] if self._token_cache_key else []
        )
        args: list[str | float] = [self._clock(), self.channel]
        for digest, until in revocations.items():
            args += [digest.hex(), f"{until:.3f}"]
        script = self._script
        await self._store.call(
            lambda client: script(keys=[self._set, *cache_keys], args=args, client=client)
        )

    def _apply(self, digest: bytes, until: float) -> None:
        self._remember(digest, until)
        self._on_revoke(digest)

    def _remember(self, digest: bytes, until: float) -> None:
        self._local[digest] = max(until, self._local.get(digest, 0.0))
        if len(self._local) > MAX_LOCAL:
            now = self._clock()
            for key in [key for key, end in self._local.items() if end <= now]:
                del self._local[key]
            while len(self._local) > MAX_LOCAL:
                del self._local[min(self._local, key=self._local.__getitem__)]
