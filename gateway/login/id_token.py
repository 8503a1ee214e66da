"""OpenID Connect Core 1.0 §3.1.3.7: the ID token of a sign-in, validated -> who is in the browser.

In order, first failure wins (:class:`~gateway.errors.LoginFailed`, the reason in ``detail``
for the log only; :class:`~gateway.errors.LoginUnavailable` while the issuer's key set has no
usable key):

1. a strict compact JWS (:func:`gateway.auth.jws.parse_compact`), at most the issuer's
   ``max_token_bytes``;
2. the JOSE header and signature by the auth layer's checks
   (:func:`gateway.auth.jwt_verifier.verify_signature`): ``alg`` one of the issuer's
   ``algorithms`` (asymmetric only), no ``crit``, ``typ`` absent or ``JWT``, the key from the
   issuer's JWK Set by ``kid`` (an unknown one refreshes the set, at most once per interval);
3. the claims by authlib's ``CodeIDToken``: ``iss`` is the issuer's ``url`` exactly, ``aud``
   names the gateway's client (``azp`` too when there are several audiences), ``exp`` not
   passed and ``iat`` not ahead (both with the issuer's ``clock_skew_s``), ``nonce`` the one
   this browser's sign-in sent;
4. ``iat`` no older than the sign-in may take (``login.login_ttl_s``): a stale token replayed
   into a fresh sign-in is refused even with a matching nonce;
5. the subject: the claim the issuer entry derives MCP callers' subjects from
   (:attr:`IssuerConfig.subject_source <gateway.config.IssuerConfig.subject_source>`), a
   non-empty string of at most :data:`~gateway.auth.claims.MAX_IDENTITY_CHARS`.
"""

from __future__ import annotations

from typing import Final

from authlib.oidc.core import CodeIDToken
from joserfc.errors import JoseError

from gateway.auth.claims import MAX_IDENTITY_CHARS
from gateway.auth.jwks import JwksCache
from gateway.auth.jws import CompactJws, parse_compact
from gateway.auth.jwt_verifier import verify_signature
from gateway.config import IssuerConfig
from gateway.errors import InvalidToken, IssuerUnavailable, LoginFailed, LoginUnavailable
from gateway.login.person import BrowserIdentity, kept_claims

__all__ = ["ID_TOKEN_TYPS", "parse_signed", "validate_id_token"]

ID_TOKEN_TYPS: Final = frozenset({None, "application/jwt"})
"""``typ`` of an ID token: absent, or ``JWT`` (normalised as a media type, RFC 7515 §4.1.9)."""
RETRY_AFTER_S: Final = 5


async def parse_signed(
    text: str,
    jwks: JwksCache,
    *,
    algorithms: frozenset[str],
    typs: frozenset[str | None],
    max_bytes: int,
) -> CompactJws:
    """Steps 1-2: a JWS signed by a key of ``jwks`` (an ID token or a verifier's assertion)."""
    if len(text) > max_bytes:
        raise LoginFailed(detail="signed token longer than allowed")
    try:
        jws = parse_compact(text)
        if jws is None:
            raise InvalidToken(detail="not a compact JWS")
        await verify_signature(jws, jwks, algorithms=algorithms, typs=typs)
    except InvalidToken as refused:
        raise LoginFailed(detail=refused.detail) from None
    except IssuerUnavailable:
        raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="jwks_unavailable") from None
    return jws


async def validate_id_token(
    id_token: str,
    jwks: JwksCache,
    issuer: IssuerConfig,
    *,
    client_id: str,
    nonce: str,
    now: float,
    max_age_s: int,
    keep: tuple[str, ...] = (),
) -> BrowserIdentity:
    """Steps 1-5 of the module docstring: the identity the ID token proves (with the values of
    the claims ``keep`` names, for approver sets)."""
    jws = await parse_signed(
        id_token,
        jwks,
        algorithms=frozenset(issuer.algorithms),
        typs=ID_TOKEN_TYPS,
        max_bytes=issuer.max_token_bytes,
    )
    claims = CodeIDToken(
        jws.claims,
        jws.header,
        options={
            "iss": {"essential": True, "value": issuer.url},
            "aud": {"essential": True, "value": client_id},
        },
        params={"nonce": nonce, "client_id": client_id},
    )
    try:
        claims.validate(now=int(now), leeway=issuer.clock_skew_s)
    except JoseError as refused:
        raise LoginFailed(detail=f"id_token claims: {refused.error}") from None
    issued_at = claims["iat"]
    if not isinstance(issued_at, int | float) or issued_at < now - max_age_s - issuer.clock_skew_s:
        raise LoginFailed(detail="id_token iat older than the sign-in")
    subject = claims.get(issuer.subject_source)
    if not isinstance(subject, str) or not subject or len(subject) > MAX_IDENTITY_CHARS:
        raise LoginFailed(detail=f"id_token has no usable {issuer.subject_source}")
    return BrowserIdentity(issuer.url, subject, kept_claims(claims, keep))
