"""OAuth 2.1 resource server (RFC 6750, RFC 7662, RFC 8414, RFC 9728) behind one Protocol.

:class:`ResourceServer` implements :class:`gateway.seams.Authenticator`. Per request, in order:

1. bearer extraction (:mod:`.bearer`): 400 / 401 rows;
2. cache lookup by SHA-256 of the token (:mod:`.cache`): a fresh positive entry is the whole
   cost of an authenticated request; a fresh negative entry is 401 without an issuer call;
3. a flight already introspecting the same token is joined (single-flight);
4. otherwise the per-client-IP failed-authentication budget is checked (429 without an issuer
   call once exhausted, so token spraying cannot become an introspection flood; one *probe*
   per ``failed_auth_probe_interval_s`` still goes through, so a valid token sharing the
   address with a guesser gets in). The budget is charged once per issuer refusal, to the
   client whose request started the introspection: requests that joined the flight, cached
   tokens, malformed tokens and negative-cache hits cost the issuer nothing and are free;
5. introspection (:mod:`.introspection`) and claim checks (:mod:`.claims`); the outcome is
   cached. An issuer that answers 400 with an error naming the token (``invalid_token``,
   ``unsupported_token_type``) refused the token: 401, charged like any refusal. An issuer fault
   is 503 + ``Retry-After`` (or, with ``stale_if_error_s``, the last
   positive result within its allowance); it is never 401 and never anonymous access.
   With ``state.share_token_cache`` another replica's result (or its introspection in flight)
   comes first; an accepted token is cached only after the revocation list said it was not
   revoked at the gateway (:mod:`.sharing`; a revocation evicts through :meth:`forget`).

Baseline scopes are not checked here: the pipeline checks them with the current policy.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from gateway.config import Config
from gateway.errors import GatewayError, InvalidToken, IssuerUnavailable, RateLimited
from gateway.limits.keys import client_key
from gateway.limits.memory import MemoryRateLimiter, retry_after_seconds
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.outbound import Destination, Outbound
from gateway.seams import (
    AuthRequest,
    CachedPrincipal,
    Principal,
    RateLimiter,
    Revocations,
    SharedTokenCache,
)

from .bearer import extract_bearer
from .cache import SingleFlight, TokenCache, token_digest
from .challenge import challenge_for
from .claims import ClaimRules, check_claims
from .introspection import IntrospectionFailed, Introspector, TokenRefused
from .issuer_metadata import DiscoveryFailed, IssuerMetadata, discover
from .resource_metadata import protected_resource_metadata
from .sharing import SHARED_CLAIM_MARGIN_S, ReplicaSharing

__all__ = ["ISSUER_RETRY_AFTER_S", "MAX_BLOCKED_IPS", "ResourceServer"]

ISSUER_RETRY_AFTER_S: Final = 5
"""``Retry-After`` (seconds) on 503 when the issuer cannot answer."""
MAX_BLOCKED_IPS: Final = 100_000
"""Client IPs remembered as over their failed-auth budget (LRU; bounded memory)."""
MAX_RETRY_BACKOFF_S: Final = 60.0
"""Longest wait between two failed metadata discovery attempts."""

_log = get_logger("gateway.auth")

_Outcome = Principal | GatewayError
"""What one introspection flight yields. Errors are returned, not raised, so every waiter
raises its own fresh exception instance (a shared instance would pile up tracebacks)."""


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
    ) -> None:
        self._config = config
        self._issuer = config.issuer
        self._outbound = outbound
        self._metrics = metrics
        self._limiter: RateLimiter = limiter if limiter is not None else MemoryRateLimiter()
        self._clock = clock
        self._baseline = baseline_scopes
        self._discovery_retry_s = discovery_retry_s
        self._sharing = ReplicaSharing(revocations, shared_cache, clock=clock)
        self._rules = ClaimRules.from_config(config)
        self._cache = TokenCache(config.issuer.cache)
        self._flights: SingleFlight[_Outcome] = SingleFlight()
        self._introspector = Introspector(config.issuer, outbound, clock=clock)
        self._blocked: OrderedDict[str, tuple[float, float]] = OrderedDict()
        """Over-budget client keys -> (blocked until, next probe allowed at)."""
        self._metadata: IssuerMetadata | None = None
        if config.issuer.introspection_endpoint is not None:
            # An explicitly configured endpoint skips discovery (and its origin rule).
            self._metadata = IssuerMetadata(config.issuer.url, config.issuer.introspection_endpoint)
        self._refresher: asyncio.Task[None] | None = None
        self._started = False
        self.last_error: str | None = None
        """Why the last discovery attempt failed (fixed text), None after a success."""

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """True once started with an introspection endpoint (configured or discovered)."""
        return self._started and self._metadata is not None

    @property
    def metadata(self) -> IssuerMetadata | None:
        return self._metadata

    async def start(self) -> None:
        """Register the ``issuer`` destination and discover metadata (unless configured).

        Never raises for an unreachable or refused issuer: the server stays not ready (every
        uncached token is answered 503), and a background task retries with exponential
        backoff, then refreshes the metadata every ``issuer.metadata_refresh_s``.
        """
        self._outbound.add(
            Destination("issuer", connect_timeout_s=min(self._issuer.timeout_s, 3.0))
        )
        self._started = True
        if self._issuer.introspection_endpoint is not None or self._refresher is not None:
            return
        await self._discover_once()
        self._refresher = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def close(self) -> None:
        """Stop the metadata refresher and any running introspection flights."""
        refresher, self._refresher = self._refresher, None
        if refresher is not None:
            refresher.cancel()
            await asyncio.gather(refresher, return_exceptions=True)
        await self._flights.cancel_all()

    async def _discover_once(self) -> bool:
        try:
            metadata = await discover(self._outbound, self._issuer)
        except DiscoveryFailed as exc:
            self.last_error = str(exc)
            _log.error(
                "issuer_discovery_failed",
                issuer=self._issuer.url,
                reason=str(exc),
                keeping_previous=self._metadata is not None,
                **(
                    {"declared_issuer": exc.declared_issuer}
                    if exc.declared_issuer is not None
                    else {}
                ),
            )
            return False
        if self._assertion_audience(metadata) is None:
            # assertion_audience: token_endpoint, but neither configured nor advertised.
            reason = "issuer metadata has no token_endpoint (issuer.assertion_audience)"
            self.last_error = reason
            _log.error("issuer_discovery_failed", issuer=self._issuer.url, reason=reason,
                       keeping_previous=self._metadata is not None)  # fmt: skip
            return False
        if metadata.auth_methods and self._issuer.client_auth not in metadata.auth_methods:
            _log.warning(
                "issuer_does_not_advertise_client_auth",
                issuer=self._issuer.url,
                client_auth=self._issuer.client_auth,
            )
        if self._metadata is None or self._metadata != metadata:
            _log.info(
                "issuer_metadata_loaded",
                issuer=metadata.issuer,
                introspection_endpoint=metadata.introspection_endpoint,
                source=metadata.source,
            )
        self._metadata = metadata
        self.last_error = None
        return True

    async def _refresh_loop(self) -> None:
        failures = 0 if self._metadata is not None else 1
        while True:
            if failures:
                delay = min(self._discovery_retry_s * 2 ** (failures - 1), MAX_RETRY_BACKOFF_S)
            else:
                delay = self._issuer.metadata_refresh_s
            await asyncio.sleep(delay)
            # A failed refresh keeps the last good metadata (logged); only a gateway that never
            # had metadata is not ready.
            try:
                ok = await self._discover_once()
            except Exception:  # a bug must not end the refresher: keep retrying, loudly
                _log.exception("issuer_discovery_crashed", issuer=self._issuer.url)
                ok = False
            failures = 0 if ok else failures + 1

    # --- Authenticator ------------------------------------------------------------------------

    async def authenticate(self, request: AuthRequest) -> Principal:
        """Return the caller's principal or raise TokenInQuery / NoCredentials / InvalidToken /
        IssuerUnavailable / RateLimited (see the module docstring for the order)."""
        try:
            token = extract_bearer(request)
        except InvalidToken as exc:
            self._rejected(request.client_ip, exc, None)
            raise
        key, fingerprint = token_digest(token)
        found = self._cache.lookup(key, self._clock())
        if found.principal is not None:
            self._count_cache("hit")
            return found.principal
        if found.negative:
            self._count_cache("hit")
            refused = InvalidToken(detail="refused earlier (negative cache)")
            self._rejected(request.client_ip, refused, fingerprint)
            raise refused
        flight = self._flights.joining(key)
        if flight is not None:
            self._count_cache("coalesced")
        else:
            budget_key = client_key(request.client_ip)
            self._check_budget(budget_key, request.client_ip, fingerprint)
            self._count_cache("miss")
            flight = self._flights.start(
                key, lambda: self._resolve(token, key, fingerprint, budget_key)
            )
        outcome = await asyncio.shield(flight)
        if isinstance(outcome, Principal):
            return outcome
        error = _fresh(outcome)
        if isinstance(error, InvalidToken):
            self._rejected(request.client_ip, error, fingerprint)
        raise error

    def challenge(self, error: GatewayError) -> str | None:
        """The ``WWW-Authenticate`` value for ``error`` (see :func:`.challenge.challenge_for`)."""
        return challenge_for(
            error, resource_metadata=self._config.prm_url, baseline=self._baseline()
        )

    def protected_resource_metadata(self) -> dict[str, Any]:
        """The RFC 9728 document served at both well-known paths."""
        return protected_resource_metadata(self._config, self._baseline())

    def forget(self, digest: bytes) -> None:
        """Evict the token with this SHA-256 digest from every cache of this replica (a
        revocation; the revocation list keeps it from being cached again)."""
        self._cache.forget(digest)

    # --- internals ----------------------------------------------------------------------------

    async def _resolve(self, token: str, key: bytes, fingerprint: str, budget_key: str) -> _Outcome:
        """The shared cache (when on), else one introspection + claim check. Runs as a single
        flight per replica; with the shared cache, as one flight across replicas (the claim).

        A refusal is charged once to the failed-auth budget of the client that started the
        flight, however many requests joined it (``budget_key``: its :func:`client_key`).
        """
        entry, claimed = await self._sharing.lookup(
            key, self._issuer.timeout_s + SHARED_CLAIM_MARGIN_S
        )
        if entry is not None:
            self._count_cache("shared")
            outcome, _ = await self._sharing.admit(
                self._cache, key, entry.principal, fingerprint, entry.fresh_until
            )
            return outcome
        outcome, shareable = await self._introspect(token, key, fingerprint, budget_key)
        if claimed:
            await self._sharing.publish(key, shareable)
        return outcome

    async def _introspect(
        self, token: str, key: bytes, fingerprint: str, budget_key: str
    ) -> tuple[_Outcome, CachedPrincipal | None]:
        """One introspection + claim check: the outcome, and what may be shared with replicas."""
        metadata = self._metadata
        if metadata is None:
            return self._issuer_down(key, fingerprint, "not_ready"), None
        audience = self._assertion_audience(metadata)
        if audience is None:
            return self._issuer_down(key, fingerprint, "not_ready"), None
        started = time.perf_counter()
        try:
            doc = await self._introspector.introspect(
                token, metadata.introspection_endpoint, audience
            )
        except TokenRefused as exc:
            # The issuer's way of saying "not active" (oidc-provider for JWTs): counted as inactive.
            self._observe("inactive", started)
            _log.info("token_refused_by_issuer", fingerprint=fingerprint,
                      status=exc.status, error=exc.error)  # fmt: skip
            refused = InvalidToken(detail=f"issuer answered {exc.status} {exc.error}")
            return await self._refused(key, refused, budget_key), None
        except IntrospectionFailed as exc:
            self._observe(exc.result, started)
            if exc.result == "client_auth_rejected":
                # Operator error: the gateway's own credentials are wrong or revoked.
                _log.error("issuer_rejected_gateway_credentials", issuer=self._issuer.url,
                           status=exc.status, error=exc.error)  # fmt: skip
            return self._issuer_down(key, fingerprint, exc.result, exc.status, exc.error), None
        now = self._clock()
        try:
            principal = check_claims(doc, self._rules, now=now, fingerprint=fingerprint)
        except InvalidToken as exc:
            self._observe("inactive" if doc.get("active") is False else "rejected", started)
            return await self._refused(key, exc, budget_key), None
        self._observe("active", started)
        return await self._sharing.admit(self._cache, key, principal, fingerprint)

    def _assertion_audience(self, metadata: IssuerMetadata) -> str | None:
        """``aud`` of a private_key_jwt assertion (``issuer.assertion_audience``; RFC 7523 §3
        item 3 allows the issuer identifier or the endpoint's URL, rfc7523bis the issuer)."""
        choice = self._issuer.assertion_audience
        if self._issuer.client_auth != "private_key_jwt":
            return metadata.issuer  # unused: no assertion is built
        if choice == "token_endpoint":
            return self._issuer.token_endpoint or metadata.token_endpoint
        if choice == "introspection_endpoint":
            return metadata.introspection_endpoint
        return metadata.issuer

    async def _refused(self, key: bytes, error: InvalidToken, budget_key: str) -> _Outcome:
        # A refusal ends any earlier acceptance (revocation), cached or stale.
        self._cache.forget(key)
        self._cache.store_negative(key, self._clock())
        await self._charge(budget_key)
        return error

    def _issuer_down(
        self,
        key: bytes,
        fingerprint: str,
        reason: str,
        status: int | None = None,
        error: str | None = None,
    ) -> _Outcome:
        stale = self._cache.stale(key, self._clock())
        if stale is not None:
            self._count_cache("stale")
            _log.warning("serving_stale_token", fingerprint=fingerprint, reason=reason,
                         status=status, error=error)  # fmt: skip
            return stale
        _log.warning("issuer_unavailable", fingerprint=fingerprint, reason=reason,
                     status=status, error=error)  # fmt: skip
        return IssuerUnavailable(retry_after=ISSUER_RETRY_AFTER_S, detail=reason)

    def _check_budget(self, budget_key: str, client_ip: str, fingerprint: str) -> None:
        """Let an uncached token from ``budget_key`` be introspected, or raise 429.

        Within budget: always. Over budget: one *probe* introspection per
        ``failed_auth_probe_interval_s`` still goes through, so a valid token from an address
        that another caller exhausted (a shared NAT, a proxy without ``trusted_proxies``) gets
        in within a few retries; everything else is 429 until the next probe slot.
        """
        blocked = self._blocked.get(budget_key)
        if blocked is None:
            return
        until, next_probe = blocked
        now = self._clock()
        if now >= until:
            del self._blocked[budget_key]
            return
        interval = self._issuer.failed_auth_probe_interval_s
        if interval > 0 and now >= next_probe:
            self._blocked[budget_key] = (until, now + interval)
            _log.info("failed_auth_probe", client_ip=client_ip, fingerprint=fingerprint)
            return
        if self._metrics is not None:
            self._metrics.rate_limited_total.labels(scope="failed_auth").inc()
        _log.info("failed_auth_budget_exhausted", client_ip=client_ip, fingerprint=fingerprint)
        wait = min(until, next_probe) - now if interval > 0 else until - now
        raise RateLimited(
            retry_after=retry_after_seconds(wait), detail="failed-auth budget exhausted"
        )

    def _rejected(self, client_ip: str, error: InvalidToken, fingerprint: str | None) -> None:
        _log.info(
            "token_rejected", reason=error.detail, fingerprint=fingerprint, client_ip=client_ip
        )

    async def _charge(self, budget_key: str) -> None:
        """Charge one issuer refusal to ``budget_key``'s failed-auth budget."""
        rate = self._issuer.failed_auth_rate
        if rate is None:
            return
        wait = await self._limiter.hit("authfail:" + budget_key, rate.count, rate.per_s)
        if wait is None:
            return
        now = self._clock()
        previous = self._blocked.get(budget_key)
        # A fresh block probes one interval from now; an extended one keeps its next probe.
        if previous is None:
            next_probe = now + self._issuer.failed_auth_probe_interval_s
        else:
            next_probe = previous[1]
        self._blocked[budget_key] = (now + wait, next_probe)
        self._blocked.move_to_end(budget_key)
        while len(self._blocked) > MAX_BLOCKED_IPS:
            self._blocked.popitem(last=False)

    def _count_cache(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.token_cache_total.labels(outcome=outcome).inc()

    def _observe(self, result: str, started: float) -> None:
        if self._metrics is not None:
            self._metrics.introspection_total.labels(result=result).inc()
            self._metrics.introspection_duration_seconds.observe(time.perf_counter() - started)
