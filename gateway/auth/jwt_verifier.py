"""Local validation of a JWT access token (RFC 9068 §4, RFC 8725) for one issuer.

:meth:`JwtVerifier.verify` takes a token already split by :func:`.jws.parse_compact` and routed
here by its ``iss``. In order, first failure wins (all :class:`~gateway.errors.InvalidToken`,
401, unless the issuer's keys are unavailable):

1. size: at most the issuer's ``max_token_bytes``;
2. header: ``alg`` in the issuer's ``algorithms`` (``none`` and ``HS*`` can never be there: they
   are refused at configuration load); no ``crit`` (RFC 7515 §4.1.11: every extension it lists
   would have to be understood, and none is); ``typ`` one of ``accept_typ`` (RFC 9068 §4 item 1,
   RFC 8725 §3.11), compared as a media type (RFC 7515 §4.1.9); ``kid``, when present, a string;
3. key: from the issuer's JWK Set by ``kid``, of the type and curve the algorithm needs and with
   the same ``alg`` when the key declares one (so an RSA public key can never stand in for an
   HMAC secret, RFC 8725 §2.1). An unknown ``kid`` asks :class:`.jwks.JwksCache` for a refresh
   (at most once per ``jwks_unknown_kid_interval_s``) before it is refused; an issuer without
   any usable key yet is 503 :class:`~gateway.errors.IssuerUnavailable` (never 401, never
   anonymous);
4. signature: verified with that key (:mod:`.signatures`: joserfc decides which key may
   verify which algorithm);
5. claims: :func:`.jwt_claims.check_jwt_claims`.

``jku``, ``x5u``, ``jwk`` and ``x5c`` headers are never used to find a key (RFC 8725 §3.10): the
only keys are those of the issuer's configured or discovered ``jwks_uri``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from gateway.config import IssuerConfig, normalise_typ
from gateway.errors import InvalidToken, IssuerUnavailable
from gateway.observability.metrics import Metrics
from gateway.seams import Principal

from .jwks import MAX_KID_CHARS, JwksCache, PublicKey
from .jws import CompactJws
from .jwt_claims import JwtRules, check_jwt_claims
from .signatures import verifier

__all__ = ["JWKS_RETRY_AFTER_S", "JwtVerifier", "signature_valid", "verify_signature"]

JWKS_RETRY_AFTER_S: Final = 5
"""``Retry-After`` on 503 when the issuer has no usable key."""


def signature_valid(jws: CompactJws, key: PublicKey) -> bool:
    """Whether ``key`` verifies the signature of ``jws`` under its (already allowed) ``alg``;
    a key of the wrong type or a malformed signature is simply not valid."""
    return verifier(jws.alg, key)(jws.signing_input, jws.signature)


async def verify_signature(
    jws: CompactJws,
    jwks: JwksCache,
    *,
    algorithms: frozenset[str],
    typs: frozenset[str | None],
) -> None:
    """Steps 2-4 of the module docstring for any JWS signed with a key of ``jwks``: the header
    (``alg`` in ``algorithms``, no ``crit``, a normalised ``typ`` in ``typs``, a string
    ``kid``), the key (an unknown ``kid`` refreshes the set, at most once per interval) and
    the signature. Raises InvalidToken, or IssuerUnavailable while the set has no usable key.
    The ID tokens and verifier assertions of the login surface are checked by it too."""
    header = jws.header
    if jws.alg not in algorithms:
        raise InvalidToken(detail="alg not allowed for this issuer")
    if "crit" in header:
        raise InvalidToken(detail="crit header (no extension is understood)")
    typ = header.get("typ")
    if typ is not None and not isinstance(typ, str):
        raise InvalidToken(detail="typ is not a string")
    if (None if typ is None else normalise_typ(typ)) not in typs:
        raise InvalidToken(detail="typ not accepted for this issuer")
    kid = header.get("kid")
    if kid is not None and (not isinstance(kid, str) or len(kid) > MAX_KID_CHARS):
        raise InvalidToken(detail="kid is not a string")
    if not jwks.ready or not jwks.keys.knows(kid):
        await jwks.refresh_for_unknown_kid()
    if not jwks.ready:
        raise IssuerUnavailable(retry_after=JWKS_RETRY_AFTER_S, detail="jwks_unavailable")
    key = jwks.keys.find(kid, jws.alg)
    if key is None:
        raise InvalidToken(
            detail="no key for this kid and alg"
            if jwks.keys.knows(kid)
            else "unknown kid (after refresh)"
        )
    if not signature_valid(jws, key):
        raise InvalidToken(detail="bad signature")


class JwtVerifier:
    def __init__(
        self,
        issuer: IssuerConfig,
        rules: JwtRules,
        jwks: JwksCache,
        *,
        clock: Callable[[], float],
        metrics: Metrics | None = None,
    ) -> None:
        self._issuer = issuer
        self._rules = rules
        self._jwks = jwks
        self._clock = clock
        self._metrics = metrics
        self._algorithms = frozenset(issuer.algorithms)
        self._typs = frozenset(issuer.accept_typ)
        results = ("valid", "refused", "no_keys")
        self._results = (
            {r: metrics.jwt_validations_total.labels(result=r) for r in results}
            if metrics is not None
            else {}
        )

    async def verify(self, jws: CompactJws, token_bytes: int, fingerprint: str) -> Principal:
        """The principal of a valid token; raise InvalidToken or IssuerUnavailable."""
        started = time.perf_counter()
        try:
            principal = await self._verify(jws, token_bytes, fingerprint)
        except InvalidToken:
            self._observe("refused", started)
            raise
        except IssuerUnavailable:
            self._observe("no_keys", started)
            raise
        self._observe("valid", started)
        return principal

    async def _verify(self, jws: CompactJws, token_bytes: int, fingerprint: str) -> Principal:
        if token_bytes > self._issuer.max_token_bytes:
            raise InvalidToken(detail="token longer than the issuer's max_token_bytes")
        await verify_signature(jws, self._jwks, algorithms=self._algorithms, typs=self._typs)
        return check_jwt_claims(jws.claims, self._rules, now=self._clock(), fingerprint=fingerprint)

    def _observe(self, result: str, started: float) -> None:
        if self._metrics is not None:
            self._results[result].inc()
            self._metrics.jwt_validation_duration_seconds.observe(time.perf_counter() - started)
