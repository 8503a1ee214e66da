"""One trusted issuer at runtime: its metadata, keys, introspection client and result cache.

A :class:`TrustedIssuer` is built per entry of ``issuers:`` (``issuer:`` is a list of one) and
does the issuer-specific work of :class:`~gateway.auth.resource_server.ResourceServer`, which
routes tokens and owns what is shared (single-flight, the failed-auth budget, revocations):

* metadata discovery (:mod:`.issuer_metadata`) at start, retried with exponential backoff while
  it fails, then refreshed every ``metadata_refresh_s`` (a failed refresh keeps the last good
  document). Skipped when everything the mode needs is configured: ``introspection_endpoint``
  for introspection, ``jwks_uri`` for JWT validation;
* the JWK Set (:mod:`.jwks`) and the local verifier (:mod:`.jwt_verifier`) when ``tokens`` is
  ``jwt`` or ``jwt+introspection``;
* one RFC 7662 introspection + claim check (:meth:`TrustedIssuer.introspect`) when it is
  ``introspection`` or ``jwt+introspection``; it returns the outcome and leaves caching, the
  budget and sharing to the caller;
* its own result cache (:class:`.cache.TokenCache`, ``cache:`` of this entry), emptied when a
  key disappears from the JWK Set (a removed key must not keep admitting cached tokens).

:attr:`TrustedIssuer.ready` is what ``/readyz`` waits for: the metadata the mode needs (once) and,
for JWT validation, a first usable key set.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from gateway.background import Background
from gateway.config import IssuerConfig
from gateway.errors import InvalidToken, IssuerUnavailable
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Outbound
from gateway.retry import refresh_forever
from gateway.seams import Principal

from .cache import TokenCache
from .claims import ClaimRules, check_claims
from .introspection import IntrospectionFailed, Introspector, TokenRefused
from .issuer_metadata import DiscoveryFailed, IssuerMetadata, discover
from .jwks import JwksCache
from .jwt_claims import JwtRules
from .jwt_verifier import JwtVerifier

__all__ = ["ISSUER_RETRY_AFTER_S", "MAX_RETRY_BACKOFF_S", "Checked", "Down", "TrustedIssuer"]

ISSUER_RETRY_AFTER_S: Final = 5
"""``Retry-After`` (seconds) on 503 when the issuer cannot answer."""
MAX_RETRY_BACKOFF_S: Final = 60.0
"""Longest wait between two failed metadata discovery attempts."""


@dataclass(frozen=True, slots=True)
class Down:
    """The issuer could not answer: a bounded reason (an ``introspection_total`` error result,
    or ``not_ready``), its HTTP status and OAuth error code when it answered."""

    reason: str
    status: int | None = None
    error: str | None = None

    def refusal(self) -> IssuerUnavailable:
        return IssuerUnavailable(retry_after=ISSUER_RETRY_AFTER_S, detail=self.reason)


Checked = Principal | InvalidToken | Down
"""What one introspection yields: accepted (not cached yet), refused by the issuer or the
claim checks, or the issuer could not answer."""

_log = get_logger("gateway.auth")


class TrustedIssuer:
    """See the module docstring."""

    def __init__(
        self,
        config: IssuerConfig,
        resource: str,
        outbound: Outbound,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        discovery_retry_s: float = 1.0,
        on_drop: Callable[[bytes], None] | None = None,
    ) -> None:
        self.config = config
        self.url = config.url
        self._outbound = outbound
        self._metrics = metrics
        self._clock = clock
        self._discovery_retry_s = discovery_retry_s
        self.cache = TokenCache(config.cache, on_drop=on_drop)
        self.rules = ClaimRules.for_issuer(resource, config)
        self._introspector = (
            Introspector(config, outbound, clock=clock) if config.introspects else None
        )
        self.jwks: JwksCache | None = None
        self.verifier: JwtVerifier | None = None
        if config.validates_jwt:
            self.jwks = JwksCache(
                config,
                outbound,
                metrics=metrics,
                retry_s=discovery_retry_s,
                on_removed=self._keys_removed,
            )
            self.verifier = JwtVerifier(
                config,
                JwtRules.for_issuer(resource, config),
                self.jwks,
                clock=clock,
                metrics=metrics,
            )
        self.metadata: IssuerMetadata | None = None
        if not self._needs_discovery:
            # Everything configured: discovery (and its origin rule) is skipped.
            self.metadata = IssuerMetadata(
                config.url, config.introspection_endpoint, jwks_uri=config.jwks_uri
            )
        self.last_error: str | None = None
        """Why the last discovery (or JWK Set fetch) failed (fixed text), None after a success."""
        self._refresher = Background(f"issuer-metadata-refresh:{config.url}")
        self._started = False

    @property
    def _needs_discovery(self) -> bool:
        config = self.config
        return (config.introspects and config.introspection_endpoint is None) or (
            config.validates_jwt and config.jwks_uri is None
        )

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Started, with the metadata the mode needs and (JWT) a usable key set."""
        if not self._started or self.metadata is None:
            return False
        return self.jwks is None or self.jwks.ready

    @property
    def failure(self) -> str | None:
        """Why this issuer is not usable right now (discovery, then the key set), if known."""
        if self.last_error is not None:
            return self.last_error
        return self.jwks.last_error if self.jwks is not None else None

    async def start(self) -> None:
        """Discover metadata (unless configured) and fetch the key set. Never raises for an
        unreachable issuer: it stays not ready and background tasks retry."""
        if self._started:
            return
        self._started = True
        if self._needs_discovery:
            await self._discover_once()
            self._refresher.start(self._refresh_loop)
        if self.jwks is not None:
            await self.jwks.start()

    async def close(self) -> None:
        await self._refresher.close()
        if self.jwks is not None:
            await self.jwks.close()

    def _keys_removed(self) -> None:
        self.cache.clear()
        _log.info("token_cache_cleared_on_key_removal", issuer=self.url)

    async def _discover_once(self) -> bool:
        config = self.config
        try:
            metadata = await discover(self._outbound, config)
        except DiscoveryFailed as exc:
            self.last_error = str(exc)
            _log.error(
                "issuer_discovery_failed",
                issuer=config.url,
                reason=str(exc),
                keeping_previous=self.metadata is not None,
                **(
                    {"declared_issuer": exc.declared_issuer}
                    if exc.declared_issuer is not None
                    else {}
                ),
            )
            return False
        if config.introspects and self.assertion_audience(metadata) is None:
            # assertion_audience: token_endpoint, but neither configured nor advertised.
            reason = "issuer metadata has no token_endpoint (issuer.assertion_audience)"
            self.last_error = reason
            _log.error(
                "issuer_discovery_failed",
                issuer=config.url,
                reason=reason,
                keeping_previous=self.metadata is not None,
            )
            return False
        if (
            config.introspects
            and metadata.auth_methods
            and config.client_auth not in metadata.auth_methods
        ):
            _log.warning(
                "issuer_does_not_advertise_client_auth",
                issuer=config.url,
                client_auth=config.client_auth,
            )
        if self.metadata is None or self.metadata != metadata:
            _log.info(
                "issuer_metadata_loaded",
                issuer=metadata.issuer,
                introspection_endpoint=metadata.introspection_endpoint,
                jwks_uri=metadata.jwks_uri,
                source=metadata.source,
            )
        self.metadata = metadata
        self.last_error = None
        if self.jwks is not None and metadata.jwks_uri is not None:
            self.jwks.set_uri(metadata.jwks_uri)
        return True

    async def _refresh_loop(self) -> None:
        # A failed refresh keeps the last good metadata (logged); only an issuer that never had
        # metadata is not ready.
        await refresh_forever(
            self._discover_once,
            every_s=self.config.metadata_refresh_s,
            first_retry_s=self._discovery_retry_s,
            max_retry_s=MAX_RETRY_BACKOFF_S,
            succeeded=self.metadata is not None,
            crashed=lambda: _log.exception("issuer_discovery_crashed", issuer=self.config.url),
        )

    def assertion_audience(self, metadata: IssuerMetadata) -> str | None:
        """``aud`` of a private_key_jwt assertion (``issuer.assertion_audience``; RFC 7523 §3
        item 3 allows the issuer identifier or the endpoint's URL, rfc7523bis the issuer)."""
        config = self.config
        choice = config.assertion_audience
        if config.client_auth != "private_key_jwt":
            return metadata.issuer  # unused: no assertion is built
        if choice == "token_endpoint":
            return config.token_endpoint or metadata.token_endpoint
        if choice == "introspection_endpoint":
            return metadata.introspection_endpoint
        return metadata.issuer

    # --- checks -------------------------------------------------------------------------------

    async def introspect(self, token: str, fingerprint: str) -> Checked:
        """One introspection + claim check of ``token`` (no caching, no budget: the caller's)."""
        metadata, introspector = self.metadata, self._introspector
        if metadata is None or introspector is None or metadata.introspection_endpoint is None:
            return Down("not_ready")
        audience = self.assertion_audience(metadata)
        if audience is None:
            return Down("not_ready")
        started = time.perf_counter()
        try:
            doc = await introspector.introspect(token, metadata.introspection_endpoint, audience)
        except TokenRefused as exc:
            # The issuer's way of saying "not active" (oidc-provider for JWTs): counted as inactive.
            self._observe("inactive", started)
            _log.info(
                "token_refused_by_issuer",
                fingerprint=fingerprint,
                issuer=self.url,
                status=exc.status,
                error=exc.error,
            )
            return InvalidToken(detail=f"issuer answered {exc.status} {exc.error}")
        except IntrospectionFailed as exc:
            self._observe(exc.result, started)
            if exc.result == "client_auth_rejected":
                # Operator error: the gateway's own credentials are wrong or revoked.
                _log.error(
                    "issuer_rejected_gateway_credentials",
                    issuer=self.url,
                    status=exc.status,
                    error=exc.error,
                )
            return Down(exc.result, exc.status, exc.error)
        try:
            principal = check_claims(doc, self.rules, now=self._clock(), fingerprint=fingerprint)
        except InvalidToken as exc:
            self._observe("inactive" if doc.get("active") is False else "rejected", started)
            return exc
        self._observe("active", started)
        return principal

    def _observe(self, result: str, started: float) -> None:
        if self._metrics is not None:
            self._metrics.introspection_total.labels(result=result).inc()
            self._metrics.introspection_duration_seconds.observe(time.perf_counter() - started)
