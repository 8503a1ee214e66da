"""A strict, bounded reader of the JWS Compact Serialization (RFC 7515 §7.1), for routing.

:func:`parse_compact` answers one question before any key is touched: is this bearer token a
JWT, and what does it claim to be? Only the compact form is read (three base64url segments; the
JSON serializations and JWE's five segments are not JWS-shaped here). It never verifies
anything: the signature is checked later, with a key of the issuer the payload names
(:mod:`.jwt_verifier`).

* ``None``: not JWS-shaped (an opaque token, or a JWE): it goes to the introspecting issuers.
  The test is strict so that opaque tokens that happen to contain two dots stay opaque: each
  segment is unpadded base64url (RFC 7515 §2), and the header decodes to a JSON object with a
  string ``alg``.
* :class:`~gateway.errors.InvalidToken`: the header is a JOSE header but the payload is not a
  JSON object (or the header has a duplicate member, a non-finite number, too much nesting).
  Such a token is refused without any outbound call: an ``iss`` read from it could not be
  trusted to route it, and no issuer should see it. So is a JWS followed by dots
  (``h.p.s.``): Keycloak reads it as the JWS itself (Java's ``String.split`` drops trailing
  empty strings), so as an "opaque" token it would dodge the JWT's own checks.
* :class:`CompactJws`: header, claims and the exact bytes the signature covers.

Every segment must be canonical base64url (:mod:`gateway.b64url`). Duplicate member names are
refused in both header and payload (RFC 7515 §4 and RFC 7519 §4: a JWT with duplicate names
MUST be rejected or read last-wins; rejecting leaves no room for a parser differential between
this check and another reader).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from gateway import b64url
from gateway.errors import InvalidToken
from gateway.jsonkit.read import JsonError, loads_object, peer_limits

__all__ = ["MAX_HEADER_CHARS", "CompactJws", "parse_compact", "read_header", "read_rest"]

MAX_HEADER_CHARS: Final = 2048
"""Longest protected header read (base64url characters); real ones are under 200."""
_LIMITS: Final = peer_limits(8)
"""JOSE headers and access-token payloads are shallow (Keycloak's ``realm_access.roles`` is 3)."""


@dataclass(frozen=True, slots=True)
class CompactJws:
    """A JWS-shaped bearer token, split and decoded, not yet verified."""

    header: dict[str, Any]
    claims: dict[str, Any]
    signing_input: bytes
    """``BASE64URL(header) || '.' || BASE64URL(payload)``: what the signature covers."""
    signature: bytes

    @property
    def alg(self) -> str:
        alg: str = self.header["alg"]
        return alg

    @property
    def iss(self) -> str | None:
        iss = self.claims.get("iss")
        return iss if isinstance(iss, str) else None


def _canonical(segment: str) -> bytes:
    # SECURITY: decoders ignore the unused low bits of the last character, so one signature has
    # up to 16 spellings; without refusing the others, a revoked token (revocation and caches
    # are keyed by the token's digest) would come back as a "new" token with a valid signature.
    decoded = b64url.decode(segment)
    if decoded is None or not decoded[1]:
        raise InvalidToken(detail="JWS segment is not canonical base64url")
    return decoded[0]


def parse_compact(token: str) -> CompactJws | None:
    """Split and decode ``token`` (see the module docstring for the three outcomes)."""
    if token.count(".") != 2:
        bare = token.rstrip(".")
        if bare != token and bare.count(".") == 2 and parse_compact(bare) is not None:
            # "h.p.s." is "h.p.s" to an issuer that splits as Java's String.split does
            # (Keycloak): routed as an opaque token it would skip this JWT's own checks and reach
            # every introspecting issuer, whatever its iss says.
            raise InvalidToken(detail="JWS with trailing dots")
        return None
    header_b64, payload_b64, signature_b64 = token.split(".")
    if not payload_b64:
        return None
    header = read_header(header_b64)
    if header is None:
        return None
    claims, signature = read_rest(payload_b64, signature_b64)
    return CompactJws(
        header=header,
        claims=claims,
        signing_input=f"{header_b64}.{payload_b64}".encode("ascii"),
        signature=signature,
    )


def read_header(segment: str) -> dict[str, Any] | None:
    """The protected header in ``segment``: None when it is not one (not base64url, not a JSON
    object with a string ``alg``: the token is not JWS-shaped); InvalidToken when it looks like
    one but is malformed or not canonical."""
    if not segment or len(segment) > MAX_HEADER_CHARS:
        return None
    decoded = b64url.decode(segment)
    if decoded is None or not decoded[0].startswith(b"{"):
        return None
    try:
        header = loads_object(decoded[0], _LIMITS)
    except JsonError:
        # Looked like a JOSE header ("{" after decoding) but is not one: refuse, do not route.
        raise InvalidToken(detail="malformed JWS header") from None
    if not isinstance(header.get("alg"), str):
        return None
    if not decoded[1]:
        raise InvalidToken(detail="JWS segment is not canonical base64url")
    return header


def read_rest(payload_b64: str, signature_b64: str) -> tuple[dict[str, Any], bytes]:
    """(claims, signature) of the segments after a JOSE header; InvalidToken when a segment is
    not canonical base64url or the payload not a JSON object."""
    raw_payload = _canonical(payload_b64)
    signature = _canonical(signature_b64)
    try:
        claims = loads_object(raw_payload, _LIMITS)
    except JsonError:
        raise InvalidToken(detail="JWS payload is not a JSON object") from None
    return claims, signature
