"""One flight: how a token that was not cached is resolved on this replica.

:meth:`Resolver.resolve` runs once per token at a time (the single-flight of
:class:`~.resource_server.ResourceServer`): local validation (:mod:`.jwt_verifier`, ``tokens:
jwt`` and ``jwt+introspection``; a refusal is 401, no key set yet is 503), then, where the issuer
introspects, the shared cache of the replicas (``state.share_token_cache``) and RFC 7662
introspection with claim checks at each candidate issuer until one accepts. An issuer 400
naming the token is a refusal (401); an issuer refusal is charged once to the budget of the
client that started the flight. An issuer fault is 503 + ``Retry-After`` (or, with
``stale_if_error_s``, the last positive result within its allowance), never 401, never
anonymous. An accepted token is cached only after the revocation list said it was not revoked
at the gateway (:mod:`.sharing`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Final

from gateway.errors import GatewayError, InvalidToken, IssuerUnavailable
from gateway.observability.logging import get_logger
from gateway.seams import Principal

from .budget import FailedAuthBudget
from .issuer_caches import IssuerCaches
from .router import Route
from .sharing import SHARED_CLAIM_MARGIN_S, ReplicaSharing
from .trusted_issuer import Down, TrustedIssuer

__all__ = ["COMBINED", "NEGATIVE", "Outcome", "Resolver"]

_log = get_logger("gateway.auth")

Outcome = Principal | GatewayError
"""What one flight yields. Errors are returned, not raised, so every waiter raises its own
fresh exception instance (a shared instance would pile up tracebacks)."""

COMBINED: Final = "jwt+introspection"

NEGATIVE: Final = "refused earlier (negative cache)"


class Resolver:
    def __init__(
        self,
        by_url: Mapping[str, TrustedIssuer],
        *,
        sharing: ReplicaSharing,
        budget: FailedAuthBudget,
        caches: IssuerCaches,
        clock: Callable[[], float],
    ) -> None:
        self._by_url = by_url
        self._sharing = sharing
        self._budget = budget
        self._caches = caches
        self._clock = clock

    async def resolve(
        self,
        route: Route,
        token: str,
        key: bytes,
        fingerprint: str,
        budget_key: str,
        *,
        revocation_key: bytes,
    ) -> Outcome:
        """One flight per token (``key``: its digest) on this replica: local validation, then
        introspection. ``revocation_key`` is what the revocation list is asked."""
        local: Principal | None = None
        if route.jws is not None:
            issuer = route.issuers[0]
            if issuer.verifier is not None:
                try:
                    local = await issuer.verifier.verify(route.jws, len(token), fingerprint)
                except InvalidToken as exc:
                    # Refused without an issuer call: cached as negative, never charged.
                    issuer.cache.forget(key)
                    issuer.cache.store_negative(key, self._clock())
                    return exc
                except IssuerUnavailable:
                    down = Down("jwks_unavailable")
                    return self._issuer_down(route, key, revocation_key, fingerprint, down)
                if not issuer.config.introspects:
                    outcome, _ = await self._sharing.admit(
                        issuer.cache, key, local, fingerprint, revocation_key=revocation_key
                    )
                    return outcome
        return await self._introspect(
            route, token, key, fingerprint, budget_key, revocation_key=revocation_key, local=local
        )

    async def _introspect(
        self,
        route: Route,
        token: str,
        key: bytes,
        fingerprint: str,
        budget_key: str,
        *,
        revocation_key: bytes,
        local: Principal | None,
    ) -> Outcome:
        """The shared cache (when on), else introspection at each candidate issuer in order.

        With the shared cache this is one flight across replicas (the claim). A refusal is
        charged once, to the client that started the flight, when no issuer accepted and none
        was down; the refusing issuer's ``failed_auth_rate`` applies.
        """
        hold = sum(i.config.timeout_s for i in route.issuers) + SHARED_CLAIM_MARGIN_S
        entry, claimed = await self._sharing.lookup(key, hold)
        if entry is not None:
            owner = self._by_url.get(entry.principal.issuer)
            wanted = COMBINED if local is not None else entry.principal.auth_method
            if (
                owner is not None
                and owner in route.issuers
                and entry.principal.auth_method == wanted
            ):
                self._caches.count("shared")
                outcome, _ = await self._sharing.admit(
                    owner.cache,
                    key,
                    entry.principal,
                    fingerprint,
                    entry.fresh_until,
                    revocation_key=revocation_key,
                )
                return outcome
        refused: tuple[TrustedIssuer, InvalidToken] | None = None
        down: Down | None = None
        for issuer in route.issuers:
            if len(route.issuers) > 1 and issuer.cache.lookup(key, self._clock()).negative:
                continue  # this issuer refused it a moment ago: ask the next one
            checked = await issuer.introspect(token, fingerprint)
            if isinstance(checked, Principal) and local is not None:
                checked = _combine(local, checked, issuer.config.subject_claim)
            if isinstance(checked, Principal):
                outcome, shareable = await self._sharing.admit(
                    issuer.cache, key, checked, fingerprint, revocation_key=revocation_key
                )
                if claimed:
                    await self._sharing.publish(key, shareable)
                return outcome
            if isinstance(checked, InvalidToken):
                # A refusal ends any earlier acceptance (revocation), cached or stale.
                issuer.cache.forget(key)
                issuer.cache.store_negative(key, self._clock())
                refused = refused or (issuer, checked)
            else:
                down = down or checked
        if claimed:
            await self._sharing.publish(key, None)
        if down is not None:
            return self._issuer_down(route, key, revocation_key, fingerprint, down)
        if refused is None:  # every candidate refused it a moment ago (negative entries)
            return InvalidToken(detail=NEGATIVE)
        issuer, error = refused
        config = issuer.config
        await self._budget.charge(
            budget_key, config.failed_auth_rate, config.failed_auth_probe_interval_s
        )
        return error

    def _issuer_down(
        self, route: Route, key: bytes, revocation_key: bytes, fingerprint: str, down: Down
    ) -> Outcome:
        now = self._clock()
        for issuer in route.issuers:
            stale = issuer.cache.stale(key, now)
            if stale is not None and stale.principal is not None:
                if self._sharing.revoked_locally(revocation_key):
                    # Revoked while the flight ran: never served, stale or not.
                    return InvalidToken(detail="revoked at the gateway")
                self._caches.count("stale")
                _log.warning(
                    "serving_stale_token",
                    fingerprint=fingerprint,
                    reason=down.reason,
                    status=down.status,
                    error=down.error,
                )
                return stale.principal
        _log.warning(
            "issuer_unavailable",
            fingerprint=fingerprint,
            reason=down.reason,
            status=down.status,
            error=down.error,
        )
        return down.refusal()


def _combine(
    local: Principal, introspected: Principal, subject_claim: str
) -> Principal | InvalidToken:
    """``jwt+introspection``: the signed token says who and what (its scopes, roles, subject
    mapping); the introspection answer, checked like any other, says it is still active. The
    earlier expiry wins; a different ``sub`` means the issuer contradicts its own token."""
    if subject_claim == "sub" and introspected.subject != local.subject:
        return InvalidToken(detail="introspection names another subject than the JWT")
    return dataclasses.replace(
        local,
        expires_at=min(local.expires_at, introspected.expires_at),
        auth_method=COMBINED,
    )
