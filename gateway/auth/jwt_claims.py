"""RFC 9068 §4 claim checks of a JWT access token whose signature was verified -> Principal.

Pure: no I/O, no clock of its own. :func:`check_jwt_claims` returns an immutable
:class:`~gateway.seams.Principal` (``auth_method="jwt"``) or raises
:class:`~gateway.errors.InvalidToken` whose ``detail`` (for logs only) names the check. Checks,
first failure wins:

1. the token is an access token: a ``cnf`` only as :func:`~gateway.auth.claims.token_binding`
   allows (``cnf.jkt`` with ``dpop`` on, RFC 9449; never mTLS, RFC 8705), none of the ID-token
   claims ``nonce``, ``at_hash``, ``c_hash``, ``s_hash`` (OIDC Core §2, §3.3.2.11: an ID token
   is for the client, never a bearer for a resource), a Keycloak-style ``typ`` claim, when
   present, ``Bearer``, and an AWS Cognito-style ``token_use``, when present, ``access``;
2. ``iss`` equals the issuer's ``url`` exactly (RFC 9068 §4 item 3; required);
3. ``aud``, ``exp``, ``nbf``, ``iat``: the same rules as introspected tokens
   (:func:`~gateway.auth.claims.check_audience`, :func:`~gateway.auth.claims.check_times`),
   and ``exp`` at most ``max_token_lifetime_s`` (plus the skew) ahead: a revocation at the
   gateway lasts until ``exp`` within that bound, so no token it accepts outlives one;
4. the subject (``subject_claim``, default ``sub``) is a non-empty string of at most
   :data:`~gateway.auth.claims.MAX_IDENTITY_CHARS`, or with ``subject_fallback: client_id`` the
   client id; the client id is the first string among ``client_id_claims`` (RFC 9068
   ``client_id``, OIDC ``azp``, Entra ``appid``), also at most that long;
5. scopes: the union of every ``scope_claims`` member present, each a space-separated string
   (RFC 9068 §2.2.3 ``scope``) or an array of strings (``scp`` of Okta; Entra ID's is a
   string), each with ``scope_prefix``; with ``roles`` configured, the roles array at that
   path, each with the roles' prefix; then ``scope_map`` (:mod:`.scopes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gateway.config import IssuerConfig
from gateway.errors import InvalidToken
from gateway.seams import Principal, frozen_claims

from .claims import (
    ID_TOKEN_CLAIMS,
    ClaimRules,
    actor_of,
    check_audience,
    check_times,
    identity_claim,
    refuse_id_token,
    token_binding,
    token_subject,
)
from .scopes import (
    MAX_SCOPES,
    DerivedScope,
    derive_scopes,
    granted,
)

__all__ = ["ID_TOKEN_CLAIMS", "MAX_SCOPES", "JwtRules", "check_jwt_claims", "derive"]

_TOKEN_USES: Final = frozenset({"access"})
"""AWS Cognito-style ``token_use`` of an access token (its ID tokens say ``id``)."""


@dataclass(frozen=True, slots=True)
class JwtRules:
    """What a JWT access token of one issuer must say (built once from its configuration)."""

    claims: ClaimRules
    """What every token of the issuer must say, its ``roles``, ``groups`` and ``scope_map``
    included."""
    scope_claims: tuple[str, ...] = ("scope", "scp")
    scope_prefix: str = ""
    subject_claim: str = "sub"
    client_id_claims: tuple[str, ...] = ("client_id", "azp", "appid")
    max_lifetime_s: float = 86400.0

    @classmethod
    def for_issuer(cls, resource: str, issuer: IssuerConfig) -> JwtRules:
        return cls(
            claims=ClaimRules.for_issuer(resource, issuer),
            scope_claims=issuer.scope_claims,
            scope_prefix=issuer.scope_prefix,
            subject_claim=issuer.subject_claim,
            client_id_claims=issuer.client_id_claims,
            max_lifetime_s=issuer.max_token_lifetime_s,
        )


def derive(claims: Mapping[str, Any], rules: JwtRules) -> tuple[DerivedScope, ...]:
    """The token's scopes with their provenance (:func:`~gateway.auth.scopes.derive_scopes`)."""
    return derive_scopes(
        claims,
        scope_claims=rules.scope_claims,
        scope_prefix=rules.scope_prefix,
        roles=rules.claims.roles,
        groups=rules.claims.groups,
        vocabulary=rules.claims.vocabulary,
    )


def check_jwt_claims(
    claims: Mapping[str, Any], rules: JwtRules, *, now: float, fingerprint: str
) -> Principal:
    """Apply the checks in the module docstring; return the principal or raise InvalidToken."""
    binding = token_binding(claims, rules.claims.dpop)
    refuse_id_token(claims, token_uses=_TOKEN_USES)

    base = rules.claims
    if claims.get("iss") != base.issuer:
        raise InvalidToken(detail="iss is not the issuer")
    check_audience(claims, base)
    exp = check_times(claims, base, now)
    if exp > now + rules.max_lifetime_s + base.skew_s:
        raise InvalidToken(detail="exp further ahead than the issuer's max_token_lifetime_s")

    client_id = None
    for name in rules.client_id_claims:
        client_id = identity_claim(claims.get(name), name)
        if client_id is not None:
            break
    subject = token_subject(claims, rules.subject_claim, client_id, base)

    return Principal(
        subject=subject,
        client_id=client_id,
        scopes=granted(derive(claims, rules)),
        expires_at=exp,
        issuer=base.issuer,
        fingerprint=fingerprint,
        skew_s=base.skew_s,
        auth_method="jwt",
        actor=actor_of(claims),
        binding=binding,
        claims=frozen_claims(claims),
    )
