"""What the gateway derives from one token's claims, offline: ``policy explain --token-file``.

The token file holds the claims as the gateway would see them: a compact JWT (its payload is
read, **not verified**: this is an operator's tool, offline), a decoded JWT payload, or an
introspection answer (a JSON object). :func:`read_token` applies the configured issuer's
derivation (:mod:`.scopes`: claim -> prefix -> role -> ``scope_map``) exactly as the claim checks
do, and says whether those checks would accept the claims now (expiry, audience, ID-token
markers...), without calling the issuer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.config import IssuerConfig
from gateway.errors import InvalidToken
from gateway.jsonkit.read import loads_object, peer_limits

from .claims import ClaimRules, check_claims, derive_introspected
from .introspection import MAX_DEPTH
from .jws import parse_compact
from .jwt_claims import JwtRules, check_jwt_claims, derive
from .scopes import DerivedScope, granted

__all__ = ["TokenReading", "issuer_for", "parse_token_file", "read_token"]


@dataclass(frozen=True, slots=True)
class TokenReading:
    """One token's claims read as its issuer's configuration reads them."""

    issuer: IssuerConfig
    scopes: tuple[DerivedScope, ...]
    subject: str | None
    client_id: str | None
    refusal: str | None
    """Why the claim checks would refuse these claims now (the ``token_rejected`` reason), or
    None when they would accept them. Signatures and the issuer's own answer are not checked."""

    @property
    def policy_scopes(self) -> frozenset[str]:
        return granted(self.scopes)

    def as_json(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer.url,
            "tokens": self.issuer.tokens,
            "sub": self.subject,
            "client_id": self.client_id,
            "accepted": self.refusal is None,
            "refusal": self.refusal,
            "derivation": [
                {
                    "source": d.source,
                    "claim": d.claim,
                    "value": d.value,
                    "spelled": d.spelled,
                    "mapped": d.scope is not None and d.scope != d.spelled,
                    "dropped": d.scope is None,
                    "scope": d.scope,
                }
                for d in self.scopes
            ],
            "policy_scopes": sorted(self.policy_scopes),
        }


def parse_token_file(text: str) -> dict[str, Any]:
    """The claims of a token file (see the module docstring); ValueError when it is neither."""
    text = text.strip()
    if text.startswith("{"):
        return loads_object(text, peer_limits(MAX_DEPTH))
    try:
        jws = parse_compact(text)
    except InvalidToken as exc:
        raise ValueError(exc.detail) from None
    if jws is None:
        raise ValueError("neither a JSON object of claims nor a compact JWT")
    return jws.claims


def issuer_for(
    claims: Mapping[str, Any], issuers: tuple[IssuerConfig, ...], url: str | None
) -> IssuerConfig:
    """The configured issuer of these claims: ``url`` when given, else the one their ``iss``
    names (as a JWT is routed), else the only one. ValueError when none fits."""
    wanted = url if url is not None else claims.get("iss")
    for issuer in issuers:
        if issuer.url == wanted:
            return issuer
    if url is None and wanted is None and len(issuers) == 1:
        return issuers[0]
    shown = wanted if isinstance(wanted, str) else "none"
    raise ValueError(
        f"no configured issuer has url {shown} (configured: "
        + ", ".join(issuer.url for issuer in issuers)
        + "); pass --issuer URL"
    )


def read_token(
    claims: Mapping[str, Any], issuer: IssuerConfig, resource: str, *, now: float
) -> TokenReading:
    """Derive the scopes, subject and client id as this issuer's tokens are read: local JWT
    rules where the issuer validates JWTs, else the introspection answer's (``scope``, ``sub``,
    ``client_id``; a claim set without ``active`` is read as an active answer)."""
    refusal: str | None = None
    subject: str | None = None
    client_id: str | None = None
    scopes: tuple[DerivedScope, ...] = ()
    try:
        if issuer.validates_jwt:
            rules = JwtRules.for_issuer(resource, issuer)
            scopes = derive(claims, rules)
            principal = check_jwt_claims(claims, rules, now=now, fingerprint="-")
        else:
            base = ClaimRules.for_issuer(resource, issuer)
            answer = {"active": True, **claims}
            scopes = derive_introspected(answer, base)
            principal = check_claims(answer, base, now=now, fingerprint="-")
        subject, client_id = principal.subject, principal.client_id
    except InvalidToken as exc:
        refusal = exc.detail
    if subject is None:  # refused: still show who the claims name, as far as they say
        found = claims.get(issuer.subject_source)
        subject = found if isinstance(found, str) else None
    if client_id is None:
        names = issuer.client_id_claims if issuer.validates_jwt else ("client_id",)
        client_id = next((v for n in names if isinstance(v := claims.get(n), str)), None)
    return TokenReading(issuer, scopes, subject, client_id, refusal)
