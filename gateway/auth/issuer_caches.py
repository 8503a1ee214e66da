"""The trusted issuers' token caches seen as one, and the ``token_cache_total`` counts.

Each :class:`~.trusted_issuer.TrustedIssuer` keeps its own :class:`~.cache.TokenCache` (keyed
by the SHA-256 of the token). :class:`IssuerCaches` asks them together: the hot path finds an
accepted token in the cache of the issuer that accepted it before the token is decoded for
routing, and a token every candidate issuer refused a moment ago is refused without a call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.observability import loop_metrics
from gateway.observability.metrics import Metrics
from gateway.observability.spans import annotate

from .cache import CacheLookup
from .trusted_issuer import TrustedIssuer

__all__ = ["IssuerCaches"]


CACHE_ATTRIBUTE = "mcp_gateway.token_cache"
"""The token check span's attribute: hit, miss, coalesced, shared (docs/operations.md)."""


class IssuerCaches:
    def __init__(self, issuers: Sequence[TrustedIssuer], metrics: Metrics | None) -> None:
        self._issuers = tuple(issuers)
        self._metrics = metrics
        self._children: dict[str, Any] = {}
        self._hit = (
            loop_metrics.counter(metrics.token_cache_total.labels(outcome="hit"))
            if metrics
            else None
        )

    def lookup(self, key: bytes, now: float) -> tuple[CacheLookup | None, bool]:
        """(a fresh positive result in any issuer's cache, whether every issuer holds a fresh
        negative entry); one lookup per issuer."""
        refused_by_all = True
        for issuer in self._issuers:
            found = issuer.cache.lookup(key, now)
            if found.principal is not None:
                return found, False
            refused_by_all = refused_by_all and found.negative
        return None, refused_by_all

    def hit(self) -> None:
        """One ``token_cache_total{outcome="hit"}`` for a positive entry that was served."""
        if self._hit is not None:
            self._hit.inc()
        annotate(CACHE_ATTRIBUTE, "hit")

    @staticmethod
    def refused_by(issuers: Sequence[TrustedIssuer], key: bytes, now: float) -> bool:
        """Whether each of ``issuers`` refused the token a moment ago (fresh negative entries)."""
        negative = sum(issuer.cache.lookup(key, now).negative for issuer in issuers)
        return negative == len(issuers)

    def forget(self, digest: bytes) -> None:
        """Evict the token with this digest from every issuer's cache."""
        for issuer in self._issuers:
            issuer.cache.forget(digest)

    def forget_revoked(self, revocation_key: bytes) -> None:
        """Evict every accepted spelling of the token with this revocation key (and, for an
        opaque token, whose key is its digest, its negative entries too)."""
        for issuer in self._issuers:
            issuer.cache.forget_revoked(revocation_key)
            issuer.cache.forget(revocation_key)

    def count(self, outcome: str) -> None:
        """One ``mcp_gateway_token_cache_total{outcome}`` (and the token check span's
        attribute, when the request is traced)."""
        annotate(CACHE_ATTRIBUTE, outcome)
        if self._metrics is not None:
            child = self._children.get(outcome)
            if child is None:  # a handful of outcomes: looked up once each
                child = self._children[outcome] = loop_metrics.counter(
                    self._metrics.token_cache_total.labels(outcome=outcome)
                )
            child.inc()
