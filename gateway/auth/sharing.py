"""What the resource server shares with the other replicas: revocations and, optionally,
introspection results (both behind the Protocols of :mod:`gateway.seams`, built in
``gateway/state``).

* :meth:`ReplicaSharing.admit` is the one gate before a result enters a cache: it asks the
  revocation list by the token's revocation key (:mod:`gateway.state.revocation_key`: what the
  issuer signed, so no spelling of a revoked token gets in; a token revoked while it was being
  introspected is refused, and a replica that restarted refuses what the others revoked), then
  stores it. The shared results stay keyed by the token's digest: a result is only ever found
  for the exact bytes an issuer accepted.
* :meth:`ReplicaSharing.lookup` and :meth:`ReplicaSharing.publish` make one introspection serve
  every replica (``state.share_token_cache``): a result another replica stored, or a claim to
  introspect, or a wait for the replica that holds the claim.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from gateway.errors import GatewayError, InvalidToken, RevocationUnavailable
from gateway.observability.logging import get_logger
from gateway.seams import CachedPrincipal, Principal, Revocations, SharedTokenCache

from .cache import TokenCache

__all__ = ["SHARED_CLAIM_MARGIN_S", "ReplicaSharing"]

SHARED_CLAIM_MARGIN_S: Final = 1.0
"""A replica's claim on a token (shared cache) outlives its introspection deadline by this."""

_log = get_logger("gateway.auth")


class ReplicaSharing:
    def __init__(
        self,
        revocations: Revocations | None,
        shared: SharedTokenCache | None,
        *,
        clock: Callable[[], float],
    ) -> None:
        self._revocations = revocations
        self._shared = shared
        self._clock = clock

    @property
    def shares_results(self) -> bool:
        return self._shared is not None

    def revoked_locally(self, revocation_key: bytes) -> bool:
        return self._revocations is not None and self._revocations.revoked_locally(revocation_key)

    async def admit(
        self,
        cache: TokenCache,
        key: bytes,
        principal: Principal,
        fingerprint: str,
        until: float | None = None,
        *,
        revocation_key: bytes,
    ) -> tuple[Principal | GatewayError, CachedPrincipal | None]:
        """Cache an accepted token (under its digest ``key``) unless its revocation key was
        revoked at the gateway; the outcome, and the entry other replicas may use (None when it
        was not cached)."""
        if self._revocations is not None:
            try:
                revoked = await self._revocations.revoked(revocation_key)
            except RevocationUnavailable as exc:
                _log.warning("revocation_check_failed", fingerprint=fingerprint)
                return exc, None
            if revoked:
                cache.forget(key)
                return InvalidToken(detail="revoked at the gateway"), None
        fresh_until = cache.store(
            key, principal, self._clock(), until=until, revocation_key=revocation_key
        )
        return principal, None if fresh_until is None else CachedPrincipal(principal, fresh_until)

    async def lookup(self, key: bytes, hold_s: float) -> tuple[CachedPrincipal | None, bool]:
        """(another replica's result, None) or (None, whether this replica claimed the token:
        True means introspect and :meth:`publish`, False means the others gave up: introspect
        without publishing)."""
        shared = self._shared
        if shared is None:
            return None, False
        entry = await shared.get(key)
        if entry is not None:
            return entry, False
        if await shared.claim(key, hold_s):
            # The claim is free either because nobody introspects this token or because the
            # replica that did has just published (the entry and the end of its claim are one
            # write): look again, or the token costs a second introspection under load.
            entry = await shared.get(key)
            if entry is None:
                return None, True
            await shared.release(key)
            return entry, False
        return await shared.wait(key, hold_s), False  # another replica is introspecting it now

    async def publish(self, key: bytes, shareable: CachedPrincipal | None) -> None:
        """End this replica's claim: share the result, or let the waiters try themselves."""
        if self._shared is None:
            return
        if shareable is not None:
            await self._shared.put(key, shareable)
        else:
            await self._shared.release(key)
