"""RFC 7662 §2.2 introspection response checks (with RFC 8707 audience rules) -> Principal.

Pure: no I/O, no clock of its own. :func:`check_claims` either returns an immutable
:class:`~gateway.seams.Principal` or raises :class:`~gateway.errors.InvalidToken` whose
``detail`` (for logs only, never rendered) names the failed check. Checks, first failure wins:

1. ``active`` is the JSON boolean ``true`` (a string or 1 is not);
2. ``cnf``: refused with ``dpop: off`` (sender-constrained tokens need a proof); otherwise only
   ``{"jkt": ...}`` (RFC 9449 §6.2; an mTLS ``x5t#S256``, RFC 8705, is never accepted), which
   becomes :attr:`~gateway.seams.Principal.binding` (:func:`token_binding`);
   ``token_type``, when present, names an access token (:data:`ACCESS_TOKEN_TYPES`, or ``DPoP``
   for a bound token); refresh tokens and ID tokens fail, and so does an answer that carries
   an ID token's claims (:func:`refuse_id_token`, the JWT path's rule: Keycloak introspects ID
   tokens as ``active`` when their ``aud`` names the resource);
3. ``iss`` equals the issuer exactly when present; required when ``require_iss`` is set;
4. ``aud`` (string or array of strings) contains an accepted audience, compared as RFC 8707
   canonical URIs; a missing ``aud`` fails (refresh tokens introspect without one);
5. ``exp`` is a number and ``now < exp + skew`` (the principal carries ``exp`` and the skew, so
   the re-check before dispatch and the cache lifetime apply the same rule);
6. ``nbf`` and ``iat``, when present, are numbers not later than ``now + skew``;
7. ``sub`` is a non-empty string, or, with ``subject_fallback: client_id``, ``client_id`` is;
   ``sub`` and ``client_id`` are at most :data:`MAX_IDENTITY_CHARS` characters;
8. ``scope``, when present, is a string; it is split on spaces, then ``scope_map`` applies
   (:mod:`.scopes`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from gateway.config import Config, DpopMode, IssuerConfig, RolesConfig, canonical_uri
from gateway.errors import InvalidToken
from gateway.seams import Principal, frozen_claims

from .scopes import IDENTITY, DerivedScope, ScopeVocabulary, derive_scopes, granted

__all__ = [
    "ACCESS_TOKEN_TYPES",
    "ID_TOKEN_CLAIMS",
    "MAX_IDENTITY_CHARS",
    "ClaimRules",
    "canonical_audience",
    "check_audience",
    "check_claims",
    "check_times",
    "derive_introspected",
    "identity_claim",
    "refuse_id_token",
    "token_binding",
    "token_subject",
]

ACCESS_TOKEN_TYPES: Final = frozenset(
    {"access_token", "bearer", "urn:ietf:params:oauth:token-type:access_token"}
)
"""Accepted ``token_type`` values, compared case-insensitively. RFC 7662 §2.2 says the value is
a RFC 6749 §7.1 token type (``Bearer``); several issuers put ``access_token`` or the RFC 8693
URN there instead. Everything else (``refresh_token``, ``id_token``, ``DPoP``, ``N_A``) fails."""

_BOUND_TOKEN_TYPES: Final = ACCESS_TOKEN_TYPES | {"dpop"}

ID_TOKEN_CLAIMS: Final = frozenset({"nonce", "at_hash", "c_hash", "s_hash"})
"""Claims only an ID token carries (OIDC Core §2, §3.3.2.11): an ID token is for the client,
never a bearer for a resource."""

MAX_JKT_CHARS: Final = 128
"""Longest ``cnf.jkt`` (a SHA-256 thumbprint is 43 base64url characters)."""
MAX_IDENTITY_CHARS: Final = 256
"""Longest ``sub`` and ``client_id`` accepted (characters). Issuers use UUIDs, emails or
``service-account-…`` names well below it; a longer value is refused (401) rather than cut, so
two principals can never collide on a truncated name."""


@dataclass(frozen=True, slots=True)
class ClaimRules:
    """What a token must say to be accepted here (built once from the configuration)."""

    issuer: str
    audiences: frozenset[str]
    """Accepted audiences as canonical URIs (the resource plus ``issuer.audiences``)."""
    require_iss: bool = False
    skew_s: float = 30.0
    subject_fallback: Literal["none", "client_id"] = "none"
    vocabulary: ScopeVocabulary = IDENTITY
    """``scope_map``: the issuer's spellings -> the policy's names."""
    roles: RolesConfig | None = None
    """``issuer.roles``: read from the introspection answer too (Keycloak's carry the token's
    claims, ``realm_access.roles`` included)."""
    groups: RolesConfig | None = None
    """``issuer.groups``: likewise (and an Entra-style overage is refused there too)."""
    dpop: DpopMode = "off"
    """``issuer.dpop.mode``: whether a ``cnf.jkt``-bound token may be accepted (RFC 9449)."""

    def __post_init__(self) -> None:
        if not self.audiences:
            raise ValueError("ClaimRules needs at least one accepted audience (the resource)")
        if self.skew_s < 0:
            raise ValueError("skew_s must be >= 0")

    @classmethod
    def from_config(cls, config: Config) -> ClaimRules:
        return cls.for_issuer(config.resource, config.issuer)

    @classmethod
    def for_issuer(cls, resource: str, issuer: IssuerConfig) -> ClaimRules:
        """The rules for ``issuer``'s tokens: ``resource`` and its ``audiences`` accepted."""
        accepted = {canonical_audience(resource)}
        accepted.update(canonical_audience(a) for a in issuer.audiences)
        accepted.discard(None)
        return cls(
            issuer=issuer.url,
            audiences=frozenset(a for a in accepted if a is not None),
            require_iss=issuer.require_iss,
            skew_s=float(issuer.clock_skew_s),
            subject_fallback=issuer.subject_fallback,
            vocabulary=ScopeVocabulary.for_issuer(issuer),
            roles=issuer.roles,
            groups=issuer.groups,
            dpop=issuer.dpop.mode,
        )


@functools.lru_cache(maxsize=1024)
def canonical_audience(value: str) -> str | None:
    """RFC 8707 canonical form of an audience value; None when it can never match.

    Values with a query or fragment never match (RFC 8707 §2: a resource has no fragment and
    SHOULD NOT have a query; a lenient match would let ``?x`` variants through). Non-URI
    audiences (``mcp-gateway``) compare as exact strings. Cached (bounded): tokens name a
    handful of audiences, and a URL parse per token is the largest part of the claim checks.
    """
    try:
        parts = urlsplit(value)
        if parts.query or parts.fragment or "#" in value:
            return None
        if not parts.scheme or not parts.netloc:
            return value
        return canonical_uri(value)
    except ValueError:  # e.g. a non-numeric port
        return None


def _number(doc: Mapping[str, Any], name: str) -> float | None:
    value = doc.get(name)
    if value is None:
        return None
    # bool is an int subclass in Python; JSON true is not a NumericDate.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(detail=f"{name} is not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range
        raise InvalidToken(detail=f"{name} is not a finite number") from None
    if not math.isfinite(number):  # "1e400" decodes to inf; NaN compares false to everything
        raise InvalidToken(detail=f"{name} is not a finite number")
    return number


def _audiences(raw: object) -> Iterable[str]:
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        return raw
    raise InvalidToken(detail="aud missing or not a string/array of strings")


def check_audience(doc: Mapping[str, Any], rules: ClaimRules) -> None:
    """``aud`` (string or array of strings) names an accepted audience (RFC 8707 canonical)."""
    if "aud" not in doc:
        raise InvalidToken(detail="aud missing")
    if not any(canonical_audience(a) in rules.audiences for a in _audiences(doc["aud"])):
        raise InvalidToken(detail="aud does not name this resource")


def check_times(doc: Mapping[str, Any], rules: ClaimRules, now: float) -> float:
    """``exp`` (required), ``nbf`` and ``iat`` against ``now`` with the skew; return ``exp``."""
    exp = _number(doc, "exp")
    if exp is None:
        raise InvalidToken(detail="exp missing")
    if now >= exp + rules.skew_s:  # the rule of Principal.expired (valid_until = exp + skew)
        raise InvalidToken(detail="token expired")
    nbf = _number(doc, "nbf")
    if nbf is not None and nbf > now + rules.skew_s:
        raise InvalidToken(detail="token not yet valid (nbf)")
    iat = _number(doc, "iat")
    if iat is not None and iat > now + rules.skew_s:
        raise InvalidToken(detail="token issued in the future (iat)")
    return exp


def identity_claim(value: object, name: str) -> str | None:
    """The subject or client a claim ``name`` names: a non-empty string, else None; refused
    over :data:`MAX_IDENTITY_CHARS`. The subject keys rate limits, goes to logs, the audit trail
    and (identity_headers) the backend: an unbounded one is a memory and header-size lever for
    whoever mints tokens."""
    if not isinstance(value, str) or not value:
        return None
    if len(value) > MAX_IDENTITY_CHARS:
        raise InvalidToken(detail=f"{name} too long")
    return value


def token_subject(
    doc: Mapping[str, Any], claim: str, client_id: str | None, rules: ClaimRules
) -> str:
    """The subject the token names in ``claim``, else its client where the issuer says
    ``subject_fallback: client_id``; raises InvalidToken when it names neither."""
    subject = identity_claim(doc.get(claim), claim)
    if subject is not None:
        return subject
    if rules.subject_fallback == "client_id" and client_id is not None:
        return client_id
    raise InvalidToken(detail=f"{claim} missing")


def derive_introspected(doc: Mapping[str, Any], rules: ClaimRules) -> tuple[DerivedScope, ...]:
    """An introspection answer's scopes with their provenance: ``scope`` (strings only, as
    RFC 7662 defines it) and the issuer's ``roles``/``groups`` mappings."""
    return derive_scopes(
        doc,
        scope_claims=("scope",),
        roles=rules.roles,
        groups=rules.groups,
        vocabulary=rules.vocabulary,
        strings_only=True,
        bounded=False,
    )


def check_claims(
    doc: Mapping[str, Any], rules: ClaimRules, *, now: float, fingerprint: str
) -> Principal:
    """Apply the checks in the module docstring; return the principal or raise InvalidToken."""
    if doc.get("active") is not True:
        raise InvalidToken(detail="token is not active")

    binding = token_binding(doc, rules.dpop)
    token_type = doc.get("token_type")
    # RFC 9449 §6.2: "DPoP" names a bound token, never an unbound one.
    accepted = ACCESS_TOKEN_TYPES if binding is None else _BOUND_TOKEN_TYPES
    if token_type is not None and (
        not isinstance(token_type, str) or token_type.lower() not in accepted
    ):
        raise InvalidToken(detail="token_type is not an access token this issuer accepts")
    refuse_id_token(doc, token_uses=_INTROSPECTED_TOKEN_USES)

    iss = doc.get("iss")
    if iss is None:
        if rules.require_iss:
            raise InvalidToken(detail="iss missing")
    elif iss != rules.issuer:
        raise InvalidToken(detail="iss is not the configured issuer")

    check_audience(doc, rules)
    exp = check_times(doc, rules, now)

    client_id = identity_claim(doc.get("client_id"), "client_id")
    subject = token_subject(doc, "sub", client_id, rules)

    return Principal(
        subject=subject,
        client_id=client_id,
        scopes=granted(derive_introspected(doc, rules)),
        expires_at=exp,
        issuer=rules.issuer,
        fingerprint=fingerprint,
        skew_s=rules.skew_s,
        actor=actor_of(doc),
        binding=binding,
        # The answer's members are the token's facts; ``active`` is the answer's own.
        claims=frozen_claims({k: v for k, v in doc.items() if k != "active"}),
    )


_INTROSPECTED_TOKEN_USES: Final = frozenset({"access", "access_token"})
"""``token_use`` values of access tokens in introspection answers: AWS Cognito's claim says
``access``, ORY Hydra's answer ``access_token`` (its refresh tokens say ``refresh_token``)."""


def refuse_id_token(doc: Mapping[str, Any], *, token_uses: frozenset[str]) -> None:
    """Raise InvalidToken when ``doc`` (a JWT's claims or an introspection answer carrying the
    token's claims, as Keycloak's does) describes an ID or refresh token, not an access token:
    an ID token's claims (:data:`ID_TOKEN_CLAIMS`), a Keycloak-style ``typ`` claim other than
    ``Bearer`` (``ID``, ``Refresh``, ``Logout``), or a ``token_use`` not in ``token_uses``."""
    # isdisjoint, not ``&``: frozenset & dict_keys is a set (dict_keys.__rand__), not a frozenset.
    if not ID_TOKEN_CLAIMS.isdisjoint(doc.keys()):
        raise InvalidToken(detail="an ID token presented as bearer")
    typ = doc.get("typ")
    if typ is not None and (not isinstance(typ, str) or typ.lower() != "bearer"):
        raise InvalidToken(detail="typ claim is not Bearer (refresh or ID token)")
    token_use = doc.get("token_use")
    if token_use is not None and token_use not in token_uses:
        raise InvalidToken(detail="token_use is not access")


def token_binding(doc: Mapping[str, Any], dpop: DpopMode) -> str | None:
    """The ``cnf.jkt`` (RFC 9449 §6) a token (JWT claims or an introspection answer) is bound
    to, None for a token without ``cnf``; raise InvalidToken for a ``cnf`` this issuer's tokens
    may not carry. Whether the request proves possession of that key is the caller's check."""
    cnf = doc.get("cnf")
    if cnf is None:
        return None
    if dpop == "off":
        # SECURITY: a sender-constrained token (DPoP cnf.jkt, mTLS cnf.x5t#S256) accepted
        # without checking its proof would let a thief skip the proof of possession.
        raise InvalidToken(detail="sender-constrained token and dpop is off")
    jkt = cnf.get("jkt") if isinstance(cnf, dict) else None
    if not isinstance(jkt, str) or not 0 < len(jkt) <= MAX_JKT_CHARS or len(cnf) != 1:
        # SECURITY: another confirmation method (mTLS x5t#S256) needs a proof this gateway
        # does not check; accepting the token on a DPoP proof alone would skip it.
        raise InvalidToken(detail="cnf binds the token to something other than a DPoP key")
    return jkt


def actor_of(doc: Mapping[str, Any]) -> str | None:
    """``act.sub`` (RFC 8693 §4.1: the current actor of a delegated token), when it is a bounded
    string; anything else is no actor (``act`` only informs the backend, it grants nothing)."""
    act = doc.get("act")
    actor = act.get("sub") if isinstance(act, dict) else None
    if isinstance(actor, str) and 0 < len(actor) <= MAX_IDENTITY_CHARS:
        return actor
    return None
