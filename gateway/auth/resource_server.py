"""OAuth 2.1 resource server (RFC 6750, RFC 7662, RFC 9068, RFC 8414, RFC 9728) behind one
Protocol.

:class:`ResourceServer` implements :class:`gateway.seams.Authenticator` for every trusted issuer
(``issuers:``; ``issuer:`` is a list of one, :mod:`.trusted_issuer`). Per request, in order:

1. bearer extraction (:mod:`.bearer`): 400 / 401 rows;
2. cache lookup by SHA-256 of the token (:mod:`.cache`) in every issuer's cache: a fresh
   positive entry, unless its revocation key is revoked, is the whole cost of an authenticated
   request, introspected or a verified JWT alike (a cached JWT is not even decoded); a token
   every issuer refused a moment ago is 401 without an issuer call;
3. the revocation key (:mod:`gateway.state.revocation_key`: what the issuer signed, the same
   for every spelling of one token) known revoked on this replica: 401 without an issuer call;
4. routing (:mod:`.router`): a JWT goes to the issuer its ``iss`` names (an unknown ``iss`` is
   401 without any outbound call), anything else to the issuers that introspect, in order; a
   fresh negative entry at every routed issuer is 401 without an issuer call;
5. a flight already resolving the same token is joined (single-flight);
6. when the route may introspect, the per-client-IP failed-authentication budget is checked
   (:mod:`.budget`: 429 without an issuer call once exhausted, one *probe* per interval still
   goes through). Local JWT validation calls no issuer and is never budgeted;
7. the flight (:mod:`.resolution`): local validation, then, where the issuer introspects, the
   shared cache of the replicas and RFC 7662 introspection at each candidate issuer until one
   accepts. An accepted token is cached only after the revocation list said its revocation key
   was not revoked at the gateway (:mod:`.sharing`; a revocation evicts every spelling of it
   from every issuer's cache through :meth:`ResourceServer.forget`).

The caches are asked together through :mod:`.issuer_caches`; the 401 challenges are rendered
once per baseline (:mod:`.challenge_cache`). Every scope named outward is spelled for the
caller's issuer (:meth:`ResourceServer.outward_scopes`, the reverse of its ``scope_map``); the
401 challenge and the protected-resource metadata, read before any token, for the first.

The shared cache holds introspection results only (``introspection`` and ``jwt+introspection``):
a verified JWT is cheaper to verify again (about 50 µs for RS256, docs/performance.md) than to
fetch from Redis, so ``tokens: jwt`` results stay in each replica's own cache.

Baseline scopes are not checked here: the pipeline checks them with the current policy.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from gateway.config import Config
from gateway.errors import GatewayError, InvalidToken
from gateway.limits.keys import client_key
from gateway.limits.memory import MemoryRateLimiter
from gateway.observability import loop_metrics
from gateway.observability.logging import emit_info, get_logger
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Destination, Outbound
from gateway.seams import (
    AUTH_METHODS,
    AuthRequest,
    CallerToken,
    DpopReplays,
    Principal,
    RateLimiter,
    Revocations,
    SharedTokenCache,
)
from gateway.state.revocation_key import revocation_key

from .bearer import MAX_TOKEN_BYTES, extract_bearer, extract_credentials
from .budget import MAX_BLOCKED_IPS, FailedAuthBudget
from .cache import SingleFlight, fingerprint_of, token_digest
from .challenge_cache import ChallengeCache
from .dpop import Proof
from .dpop_guard import DpopGuard
from .issuer_caches import IssuerCaches
from .issuer_metadata import IssuerMetadata
from .resolution import NEGATIVE, Flight, Outcome, Resolver
from .resource_metadata import protected_resource_metadata
from .router import TokenRouter
from .scopes import ScopeVocabulary
from .sharing import ReplicaSharing
from .trusted_issuer import ISSUER_RETRY_AFTER_S, TrustedIssuer

__all__ = ["ISSUER_RETRY_AFTER_S", "MAX_BLOCKED_IPS", "ResourceServer"]

_log = get_logger("gateway.auth")


_REVOKED: Final = "revoked at the gateway"


def _fresh(error: GatewayError) -> GatewayError:
    return type(error)(detail=error.detail, retry_after=error.retry_after)


class ResourceServer:
    """The gateway's authenticator: see the module docstring for the order of checks."""

    def __init__(
        self,
        config: Config,
        outbound: Outbound,
        *,
        metrics: Metrics | None = None,
        limiter: RateLimiter | None = None,
        clock: Callable[[], float] = time.time,
        baseline_scopes: Callable[[], tuple[str, ...]] = lambda: (),
        discovery_retry_s: float = 1.0,
        revocations: Revocations | None = None,
        shared_cache: SharedTokenCache | None = None,
        dpop_replays: DpopReplays | None = None,
    ) -> None:
        self._config = config
        self._outbound = outbound
        self._metrics = metrics
        self._clock = clock
        self._baseline = baseline_scopes
        # Per issuer url (Principal.issuer): the policy's scope names -> that issuer's spelling.
        self._vocabularies = {i.url: ScopeVocabulary.for_issuer(i) for i in config.issuers}
        self._first_vocabulary = self._vocabularies[config.issuer.url]
        guard = DpopGuard(config, dpop_replays, metrics=metrics, clock=clock)
        self._dpop = guard if guard.enabled else None
        """RFC 9449 at this resource (None: no issuer accepts DPoP-bound tokens)."""
        # A 401 names the baseline as the first issuer spells it, unless the pipeline already
        # spelled it for a known caller (error.scopes).
        self._challenges = ChallengeCache(
            config,
            lambda: self._first_vocabulary.outward(baseline_scopes()),
            dpop_algs=guard.algorithms,
            bearer=guard.accepts_bearer,
        )
        self._drop_listeners: list[Callable[[bytes], None]] = []
        self.issuers = tuple(
            TrustedIssuer(
                issuer,
                config.resource,
                outbound,
                metrics=metrics,
                clock=clock,
                discovery_retry_s=discovery_retry_s,
                on_drop=self._dropped,
            )
            for issuer in config.issuers
        )
        self._by_url = {issuer.url: issuer for issuer in self.issuers}
        self._router = TokenRouter(self.issuers)
        self._max_token_bytes = max(MAX_TOKEN_BYTES, *(i.max_token_bytes for i in config.issuers))
        self._budget = FailedAuthBudget(
            limiter if limiter is not None else MemoryRateLimiter(), metrics=metrics, clock=clock
        )
        self._sharing = ReplicaSharing(revocations, shared_cache, clock=clock)
        self._caches = IssuerCaches(self.issuers, metrics)
        self._resolver = Resolver(
            self._by_url,
            sharing=self._sharing,
            budget=self._budget,
            caches=self._caches,
            clock=clock,
        )
        self._flights: SingleFlight[Outcome] = SingleFlight()
        self._accepted = (
            {
                m: loop_metrics.counter(metrics.authentications_total.labels(auth_method=m))
                for m in AUTH_METHODS
            }
            if metrics is not None
            else {}
        )
        self._started = False

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """True once started and every issuer is usable (metadata, and keys for JWTs)."""
        return self._started and all(issuer.ready for issuer in self.issuers)

    @property
    def metadata(self) -> IssuerMetadata | None:
        """The first issuer's metadata (configured or discovered)."""
        return self.issuers[0].metadata

    @property
    def last_error(self) -> str | None:
        """Why the first issuer that is not usable is not (fixed text), None when all are."""
        return next((i.failure for i in self.issuers if i.failure is not None), None)

    def report(self) -> list[dict[str, Any]]:
        """Per issuer, for ``/readyz``: its url, ``tokens`` mode, whether it is usable, why not
        (fixed text), and how many keys its JWK Set holds."""
        out: list[dict[str, Any]] = []
        for issuer in self.issuers:
            entry: dict[str, Any] = {
                "url": issuer.url,
                "tokens": issuer.config.tokens,
                "ready": issuer.ready,
            }
            if issuer.jwks is not None:
                entry["keys"] = len(issuer.jwks.keys)
            if issuer.failure is not None:
                entry["reason"] = issuer.failure
            out.append(entry)
        return out

    async def start(self) -> None:
        """Register the ``issuer`` destination, then discover metadata and fetch key sets.

        Never raises for an unreachable or refused issuer: it stays not ready (its uncached
        tokens are answered 503) and background tasks retry with exponential backoff.
        """
        shortest = min(i.timeout_s for i in self._config.issuers)
        self._outbound.add(Destination("issuer", connect_timeout_s=min(shortest, 3.0)))
        self._started = True
        await asyncio.gather(*(issuer.start() for issuer in self.issuers))

    async def close(self) -> None:
        """Stop the refreshers and any running flights."""
        for issuer in self.issuers:
            await issuer.close()
        await self._flights.cancel_all()

    # --- Authenticator ------------------------------------------------------------------------

    async def authenticate(self, request: AuthRequest) -> Principal:
        """Return the caller's principal or raise TokenInQuery / NoCredentials / InvalidToken /
        IssuerUnavailable / RateLimited (see the module docstring for the order)."""
        proof: Proof | None = None
        try:
            if self._dpop is None:
                token = extract_bearer(request, max_bytes=self._max_token_bytes)
                key, fingerprint = token_digest(token)
            else:
                # The proof first: a bad one costs no issuer call and no cache entry.
                token, key, proof = self._dpop.credentials(request, max_bytes=self._max_token_bytes)
                fingerprint = fingerprint_of(key)
        except InvalidToken as exc:
            self._rejected(request.client_ip, exc, None)
            raise
        now = self._clock()
        # The hot path: a token accepted before is in the cache of the issuer that accepted it,
        # found by digest before the token is decoded for routing (one lookup per issuer).
        found, refused_by_all = self._caches.lookup(key, now)
        if found is not None and found.principal is not None:
            if not self._sharing.revoked_locally(found.revocation_key):
                self._caches.hit()
                if self._dpop is not None:
                    return await self._bound(found.principal, proof, request.client_ip)
                return self._accept(found.principal)
            # Revoked since it was cached (every path checks the key, not only the eviction).
            self._caches.forget(key)
            raise self._rejected(request.client_ip, InvalidToken(detail=_REVOKED), fingerprint)
        if refused_by_all:
            # Every trusted issuer refused it a moment ago, so every issuer the router could
            # pick did: refused without decoding the token again (a retried bad token).
            self._caches.count("hit")
            raise self._rejected(request.client_ip, InvalidToken(detail=NEGATIVE), fingerprint)
        revocation = revocation_key(token)
        if self._sharing.revoked_locally(revocation):
            # Known revoked here (broadcast, marker or earlier refusal), in whatever spelling:
            # no issuer call, no budget charge, however often the client retries it.
            raise self._rejected(request.client_ip, InvalidToken(detail=_REVOKED), fingerprint)
        try:
            route = self._router.route(token)
        except InvalidToken as exc:
            self._rejected(request.client_ip, exc, fingerprint)
            raise
        if self._caches.refused_by(route.issuers, key, now):
            self._caches.count("hit")
            # No local name for the exception (see the end of this method).
            raise self._rejected(request.client_ip, InvalidToken(detail=NEGATIVE), fingerprint)
        if proof is not None and self._dpop is not None:
            # Every issuer the token may come from wants a nonce: asked now, before any call.
            try:
                self._dpop.check_nonce_early(proof, [i.url for i in route.issuers])
            except InvalidToken as exc:
                raise self._rejected(request.client_ip, exc, fingerprint) from None
        flight = self._flights.joining(key)
        if flight is not None:
            self._caches.count("coalesced")
        else:
            budget_key = client_key(request.client_ip)
            if route.introspects:
                self._budget.check(budget_key, request.client_ip, fingerprint)
            self._caches.count("miss")
            flight = self._flights.start(
                key,
                lambda: self._resolver.resolve(
                    Flight(route, token, key, fingerprint, budget_key, revocation)
                ),
            )
        outcome = await asyncio.shield(flight)
        if isinstance(outcome, Principal):
            if self._dpop is not None:
                return await self._bound(outcome, proof, request.client_ip)
            return self._accept(outcome)
        # Raised without a local name: a local holding the exception would make a reference
        # cycle (exception -> traceback -> this frame -> exception) per refused request, each
        # holding the request's objects until the cyclic collector runs.
        if isinstance(outcome, InvalidToken):
            raise self._rejected(request.client_ip, _fresh(outcome), fingerprint)
        raise _fresh(outcome)

    def challenge(self, error: GatewayError) -> str | None:
        """The ``WWW-Authenticate`` value for ``error`` (see :mod:`.challenge_cache`)."""
        return self._challenges.challenge(error)

    def outward_scopes(self, scopes: Sequence[str], principal: Principal | None) -> tuple[str, ...]:
        """``scopes`` (the policy's names) as the issuer of ``principal``'s token spells them
        (the reverse of its ``scope_map``); without a principal, as the first issuer does."""
        vocabulary = self._first_vocabulary
        if principal is not None:
            vocabulary = self._vocabularies.get(principal.issuer, vocabulary)
        return vocabulary.outward(scopes)

    def protected_resource_metadata(self) -> dict[str, Any]:
        """The RFC 9728 document served at both well-known paths."""
        # Read before any token: the first issuer's spelling (the one clients discover).
        return protected_resource_metadata(
            self._config, self._first_vocabulary.outward(self._baseline())
        )

    def forget(self, revocation_key: bytes) -> None:
        """Evict every spelling of the token with this revocation key from every issuer's cache
        on this replica (a revocation; the revocation list keeps it from being cached again)."""
        self._caches.forget_revoked(revocation_key)

    def caller_token(self, request: AuthRequest) -> CallerToken:
        """The bearer token of a request :meth:`authenticate` accepted, wrapped for the RFC 8693
        token-exchange credential (the only consumer allowed to send it on, to the issuer)."""
        _, token = extract_credentials(
            request, max_bytes=self._max_token_bytes, dpop=self._dpop is not None
        )
        return CallerToken(token, token_digest(token)[0])

    def revocation_key(self, request: AuthRequest) -> bytes:
        """The revocation key of an accepted request's token; InvalidToken once it is revoked
        here (a stream registers under the key right after, with no wait in between)."""
        _, token = extract_credentials(
            request, max_bytes=self._max_token_bytes, dpop=self._dpop is not None
        )
        key = revocation_key(token)
        if self._sharing.revoked_locally(key):
            fingerprint = token_digest(token)[1]
            raise self._rejected(request.client_ip, InvalidToken(detail=_REVOKED), fingerprint)
        return key

    def on_token_dropped(self, listener: Callable[[bytes], None]) -> None:
        """Call ``listener(digest)`` whenever an accepted token's cache entry is dropped
        (expired, evicted, forgotten): what was derived from that token goes with it."""
        self._drop_listeners.append(listener)

    def _dropped(self, digest: bytes) -> None:
        for listener in self._drop_listeners:
            listener(digest)

    # --- internals ----------------------------------------------------------------------------

    async def _bound(self, principal: Principal, proof: Proof | None, client_ip: str) -> Principal:
        """The DPoP checks that need the principal (:meth:`.dpop_guard.DpopGuard.admit`)."""
        assert self._dpop is not None
        try:
            admitted = await self._dpop.admit(principal, proof)
        except InvalidToken as exc:
            raise self._rejected(client_ip, exc, principal.fingerprint) from None
        return self._accept(admitted)

    def _accept(self, principal: Principal) -> Principal:
        counter = self._accepted.get(principal.auth_method)
        if counter is not None:
            counter.inc()
        return principal

    def _rejected(
        self, client_ip: str, error: GatewayError, fingerprint: str | None
    ) -> GatewayError:
        """Log ``token_rejected`` for ``error`` and return it (for ``raise``). Rendered directly
        (:func:`emit_info`): a client retrying a refused token makes one such line per retry."""
        emit_info(
            _log,
            "token_rejected",
            {"reason": error.detail, "fingerprint": fingerprint, "client_ip": client_ip},
            context=True,
        )
        return error
