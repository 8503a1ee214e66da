"""What a revocation names: what the issuer signed, never the token's bytes alone.

One signed token has many spellings that verify: ECDSA's second signature ``(r, n - s)``
(ES256/ES384/ES512: anyone holding a token can write it without the key; JOSE forbids neither
form and about half of real issuers' ES256 tokens are high-S, so both are accepted), and the
base64url variants a lenient decoder reads as the same bytes (padding, ``+/`` for ``-_``, set
low bits in the last character). Keyed by the token's SHA-256, each would be a "new" token that
a revocation does not reach. :func:`revocation_key` maps every spelling to one key:

* a JWS (three segments whose first decodes to a JOSE header): with a string ``iss`` and
  ``jti`` in the payload, the issuer and ``jti`` (RFC 7519 §4.1.7: unique per issuer); else the
  signing input ``BASE64URL(header) '.' BASE64URL(payload)``, re-encoded canonically. The
  signature is never part of the key;
* a JWE (five segments, a header with ``enc``): its five segments, re-encoded canonically;
* anything else (an opaque token): the SHA-256 of the token, as before; only the issuer can
  tell its spellings apart.

Trailing empty segments past the third are dropped first (``h.p.s.`` is ``h.p.s``): not a JWS to
the gateway, such a spelling goes to introspection, and an issuer that splits the way Java's
``String.split`` does (Keycloak) reads it as the token itself.

The segments are decoded leniently here on purpose (the auth router's :mod:`gateway.auth.jws`
is strict): a spelling the gateway refuses today, an issuer's introspection endpoint might
accept. Nothing is verified: a key names a token, it never admits one (the principal cache
stays keyed by the exact bytes that were verified). ``mcp-gateway revoke`` computes the same key
on the operator's machine, so only the key crosses the network. It lives beside the revocation
list it keys (:mod:`.revocation`) so that the authenticator, the admin API of the ops listener
and the ``revoke`` command all reach it without reaching into each other.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gateway import b64url
from gateway.config import IssuerConfig
from gateway.jsonkit.read import JsonError, loads_object, peer_limits

__all__ = ["KEY_BYTES", "RevocationTarget", "kept_until", "revocation_key", "revocation_target"]

KEY_BYTES: Final = 32
_LABEL: Final = b"mcp-gateway/revocation/v1"
_NOT_ALPHABET: Final = re.compile(r"[^A-Za-z0-9_\-+/]")
_LIMITS: Final = peer_limits(8)


@dataclass(frozen=True, slots=True)
class RevocationTarget:
    """A token as a revocation sees it (read, not verified)."""

    key: bytes
    """:func:`revocation_key` (32 bytes)."""
    issuer: str | None = None
    """The JWT's ``iss``, when it has a string one."""
    expires_at: float | None = None
    """The JWT's ``exp``, when it has a finite number: the revocation must last that long."""


def _decode(segment: str) -> bytes | None:
    """The bytes a lenient (non-validating) base64 decoder reads: characters outside the
    alphabet dropped, ``+/`` read as ``-_``, padding optional, unused low bits ignored."""
    text = _NOT_ALPHABET.sub("", segment).replace("+", "-").replace("/", "_")
    if len(text) % 4 == 1:
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


def _header(raw: bytes | None) -> dict[str, object] | None:
    if raw is None or not raw.startswith(b"{"):
        return None
    try:
        return loads_object(raw, _LIMITS)
    except JsonError:
        return None


def _hash(kind: bytes, *parts: bytes) -> bytes:
    digest = hashlib.sha256(_LABEL + b"\0" + kind)
    for part in parts:  # length-prefixed: no two part lists hash alike
        digest.update(len(part).to_bytes(4, "big") + part)
    return digest.digest()


def revocation_target(token: str) -> RevocationTarget:
    """The key of ``token`` and, for a JWT, its ``iss`` and ``exp`` (see the module docstring)."""
    segments = token.split(".")
    # An issuer that splits as Java's String.split does (Keycloak's JWSInput) drops trailing
    # empty strings: "h.p.s." is "h.p.s" to it, so its introspection calls both active.
    while len(segments) > 3 and not segments[-1]:
        segments.pop()
    if len(segments) in (3, 5):
        raw_header = _decode(segments[0])
        header = _header(raw_header)
        if header is not None and len(segments) == 3 and isinstance(header.get("alg"), str):
            payload = _decode(segments[1])
            if payload is not None:  # the signature, however spelled, is not part of the key
                return _jws_target(raw_header or b"", payload)
        elif header is not None and len(segments) == 5 and isinstance(header.get("enc"), str):
            raw = [_decode(segment) for segment in segments]
            parts = [b64url.encode_bytes(part) for part in raw if part is not None]
            if len(parts) == 5:
                return RevocationTarget(_hash(b"jwe", *parts))
    return RevocationTarget(hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest())


def _jws_target(header: bytes, payload: bytes) -> RevocationTarget:
    try:
        claims = loads_object(payload, _LIMITS)
    except JsonError:
        claims = {}
    iss, jti, exp = claims.get("iss"), claims.get("jti"), claims.get("exp")
    issuer = iss if isinstance(iss, str) else None
    expires = float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
    if expires is not None and not math.isfinite(expires):
        expires = None
    if issuer is not None and isinstance(jti, str) and jti:
        key = _hash(
            b"jti", issuer.encode("utf-8", "surrogatepass"), jti.encode("utf-8", "surrogatepass")
        )
    else:
        key = _hash(b"jws", b64url.encode_bytes(header) + b"." + b64url.encode_bytes(payload))
    return RevocationTarget(key, issuer, expires)


def revocation_key(token: str) -> bytes:
    """The 32-byte key under which ``token`` (any spelling of it) is revoked."""
    return revocation_target(token).key


def kept_until(
    issuers: Sequence[IssuerConfig], iss: str | None, expires_at: float | None, now: float
) -> float:
    """How long a revocation of a JWT with this ``iss`` and ``exp`` must last: until ``exp`` plus
    the issuer's ``clock_skew_s`` (the last instant the gateway accepts it), but no later than
    any token of that issuer acceptable now can live (``now + max_token_lifetime_s`` plus the
    skew twice: :mod:`gateway.auth.jwt_claims` refuses an ``exp`` further ahead). An ``iss``
    that names no configured issuer takes the most lenient issuer's bounds. 0 without an
    ``exp`` (an opaque token: ``admin.revocation_ttl_s`` alone).

    ``tokens: introspection`` checks no JWT locally, so nothing refuses an ``exp`` past
    ``max_token_lifetime_s`` there (a Keycloak JWT introspected is accepted until its ``exp``):
    its revocation lasts until ``exp`` plus the skew, unbounded."""
    if expires_at is None or not issuers:
        return 0.0
    named = [issuer for issuer in issuers if issuer.url == iss] or list(issuers)
    skew = max(issuer.clock_skew_s for issuer in named)
    if any(issuer.tokens == "introspection" for issuer in named):
        return expires_at + skew
    lifetime = max(issuer.max_token_lifetime_s for issuer in named)
    return min(expires_at + skew, now + lifetime + 2 * skew)
