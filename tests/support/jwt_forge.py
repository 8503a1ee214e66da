"""Forged and malformed JWTs for the refusal tests (what an attacker can make without the key).

Well-signed tokens that are wrong in one respect come from the development issuer itself
(``DevIssuer.sign_jwt``); this module makes what no issuer would sign: ``alg: none``, an HMAC
"signed" with the issuer's *public* key (RFC 8725 §2.1 key confusion), a tampered signature.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any, Final

from joserfc.jwk import RSAKey

__all__ = [
    "ECDSA_ORDERS",
    "access_claims",
    "b64url",
    "forge_hs256_with_public_key",
    "forge_none",
    "high_s",
    "respell_ecdsa",
    "tamper",
]

ECDSA_ORDERS: Final = {
    "ES256": 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551,
    "ES384": int(
        "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFC7634D81F4372DDF581A0DB248B0A77AECEC196ACCC52973",
        16,
    ),
    "ES512": int(
        "01FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFA"
        "51868783BF2F966B7FCC0148F709A5D03BB5C9B8899C47AEBB6FB71E91386409",
        16,
    ),
}
"""The group order n of each JOSE ECDSA curve (P-256, P-384, P-521; SEC 2)."""


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _segment(doc: dict[str, Any]) -> str:
    return b64url(json.dumps(doc, separators=(",", ":")).encode())


def access_claims(issuer: str, audience: str, **changes: Any) -> dict[str, Any]:
    """RFC 9068 claims of a valid access token for ``audience``; ``changes`` override (None
    removes a claim)."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": issuer,
        "sub": "mallory",
        "aud": audience,
        "client_id": "forger",
        "scope": "mcp:access tools:echo",
        "iat": now,
        "exp": now + 600,
        "jti": f"forged-{now}",
    }
    for name, value in changes.items():
        if value is None:
            claims.pop(name, None)
        else:
            claims[name] = value
    return claims


def forge_none(claims: dict[str, Any]) -> str:
    """An unsecured JWS (RFC 7515 Appendix A.5): ``alg: none`` and an empty signature."""
    return f"{_segment({'alg': 'none', 'typ': 'at+jwt'})}.{_segment(claims)}."


def forge_hs256_with_public_key(claims: dict[str, Any], public_key: RSAKey, kid: str) -> str:
    """HS256 with the issuer's public key (PEM) as the HMAC secret: the classic confusion
    attack on verifiers that take ``alg`` from the token and the key from the JWKS."""
    secret = public_key.as_pem(private=False)
    signing_input = f"{_segment({'alg': 'HS256', 'typ': 'at+jwt', 'kid': kid})}.{_segment(claims)}"
    mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(mac)}"


def tamper(token: str) -> str:
    """The same token with one signature byte changed (still canonical base64url)."""
    header, payload, signature = token.split(".")
    raw = bytearray(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return f"{header}.{payload}.{b64url(bytes(raw))}"


def _ecdsa_parts(token: str) -> tuple[str, int, int, int, int]:
    signing_input, _, signature = token.rpartition(".")
    header = json.loads(base64.urlsafe_b64decode(signing_input.split(".")[0] + "=="))
    order = ECDSA_ORDERS[header["alg"]]
    raw = base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))
    size = len(raw) // 2
    r, s = int.from_bytes(raw[:size], "big"), int.from_bytes(raw[size:], "big")
    return signing_input, size, r, s, order


def respell_ecdsa(token: str) -> str:
    """The same signed token with its other valid ECDSA signature ``(r, n - s)``: what anyone
    holding an ES256/ES384/ES512 token can write without the key."""
    signing_input, size, r, s, order = _ecdsa_parts(token)
    other = r.to_bytes(size, "big") + (order - s).to_bytes(size, "big")
    return signing_input + "." + b64url(other)


def high_s(token: str) -> bool:
    """Whether the ECDSA signature of ``token`` is in its high-S form (``s > n / 2``)."""
    _, _, _, s, order = _ecdsa_parts(token)
    return s > order // 2
