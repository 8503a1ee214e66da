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
from dataclasses import dataclass
from typing import Final

from gateway.errors import GatewayError, InvalidToken, IssuerUnavailable
from gateway.observability.logging import get_logger
from gateway.seams import Principal

from .budget import FailedAuthBudget
from .issuer_caches import IssuerCaches
from .router import Route
from .sharing import SHARED_CLAIM_MARGIN_S, ReplicaSharing
from .trusted_issuer import Down, TrustedIssuer

__all__ = ["COMBINED", "NEGATIVE", "Flight", "Outcome", "Resolver"]

_log = get_logger("gateway.auth")

Outcome = Principal | GatewayError
"""What one flight yields. Errors are returned, not raised, so every waiter raises its own
fresh exception instance (a shared instance would pile up tracebacks)."""

COMBINED: Final = "jwt+introspection"

NEGATIVE: Final = "refused earlier (negative cache)"


@dataclass(frozen=True, slots=True)
class Flight:
    """One token to resolve, as the request that started the flight found it."""

    route: Route
    token: str
    key: bytes
    """The token's digest: its cache key."""
    fingerprint: str
    """The token's fingerprint for logs."""
    budget_key: str
    """The failed-authentication budget of the client that started the flight."""
    revocation_key: bytes
    """What the revocation list is asked."""


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

    async def resolve(self, flight: Flight) -> Outcome:
        """One flight per token on this replica: local validation, then introspection."""
        local: Principal | None = None
        route = flight.route
        if route.jws is not None:
            issuer = route.issuers[0]
            if issuer.verifier is not None:
                try:
                    local = await issuer.verifier.verify(
                        route.jws, len(flight.token), flight.fingerprint
                    )
                except InvalidToken as exc:
                    # Refused without an issuer call: cached as negative, never charged.
                    self._refused(issuer, flight.key)
                    return exc
                except IssuerUnavailable:
                    return self._issuer_down(flight, Down("jwks_unavailable"))
                if not issuer.config.introspects:
                    return await self._admit(flight, issuer, local)
        return await self._introspect(flight, local)

    async def _admit(
        self, flight: Flight, issuer: TrustedIssuer, principal: Principal, *, claimed: bool = False
    ) -> Outcome:
        """Cache an accepted token (unless revoked meanwhile); ``claimed``: publish it to the
        other replicas too."""
        outcome, shareable = await self._sharing.admit(
            issuer.cache,
            flight.key,
            principal,
            flight.fingerprint,
            revocation_key=flight.revocation_key,
        )
        if claimed:
            await self._sharing.publish(flight.key, shareable)
        return outcome

    def _refused(self, issuer: TrustedIssuer, key: bytes) -> None:
        """A refusal ends any earlier acceptance (revocation), cached or stale."""
        issuer.cache.forget(key)
        issuer.cache.store_negative(key, self._clock())

    async def _introspect(self, flight: Flight, local: Principal | None) -> Outcome:
        """The shared cache (when on), else introspection at each candidate issuer in order.

        With the shared cache this is one flight across replicas (the claim). A refusal is
        charged once, to the client that started the flight, when no issuer accepted and none
        was down; the refusing issuer's ``failed_auth_rate`` applies.
        """
        route, key = flight.route, flight.key
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
                    flight.fingerprint,
                    entry.fresh_until,
                    revocation_key=flight.revocation_key,
                )
                return outcome
        refused: tuple[TrustedIssuer, InvalidToken] | None = None
        down: Down | None = None
        for issuer in route.issuers:
            if len(route.issuers) > 1 and issuer.cache.lookup(key, self._clock()).negative:
                continue  # this issuer refused it a moment ago: ask the next one
            checked = await issuer.introspect(flight.token, flight.fingerprint)
            if isinstance(checked, Principal) and local is not None:
                checked = _combine(local, checked, issuer.config.subject_claim)
            if isinstance(checked, Principal):
                return await self._admit(flight, issuer, checked, claimed=claimed)
            if isinstance(checked, InvalidToken):
                self._refused(issuer, key)
                refused = refused or (issuer, checked)
            else:
                down = down or checked
        if claimed:
            await self._sharing.publish(key, None)
        if down is not None:
            return self._issuer_down(flight, down)
        if refused is None:  # every candidate refused it a moment ago (negative entries)
            return InvalidToken(detail=NEGATIVE)
        issuer, error = refused
        config = issuer.config
        await self._budget.charge(
            flight.budget_key, config.failed_auth_rate, config.failed_auth_probe_interval_s
        )
        return error

    def _issuer_down(self, flight: Flight, down: Down) -> Outcome:
        """The last positive result within its allowance (``stale_if_error_s``) unless revoked
        meanwhile, else 503."""
        stale = self._stale(flight)
        if stale is not None:
            if self._sharing.revoked_locally(flight.revocation_key):
                # Revoked while the flight ran: never served, stale or not.
                return InvalidToken(detail="revoked at the gateway")
            self._caches.count("stale")
        _log.warning(
            "issuer_unavailable" if stale is None else "serving_stale_token",
            fingerprint=flight.fingerprint,
            reason=down.reason,
            status=down.status,
            error=down.error,
        )
        return down.refusal() if stale is None else stale

    def _stale(self, flight: Flight) -> Principal | None:
        now = self._clock()
        for issuer in flight.route.issuers:
            entry = issuer.cache.stale(flight.key, now)
            if entry is not None and entry.principal is not None:
                return entry.principal
        return None


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
