"""PEM keys of the caller assertions: parsed, checked against their algorithm, named.

Used at load (``identity.assertion.key``, ``identity_jwks.publish_keys``: a mistake is a
``file:line`` problem, never a failing request) and again whenever a key file changes (rotation
without restart, :mod:`gateway.backend.credentials.assertion_keys`). Errors are :class:`KeyProblem`
with a fixed message that never quotes the key.

Algorithms and key types (RFC 7518 §3.3/§3.4, RFC 8037 §3.1): ``EdDSA`` takes an Ed25519 or
Ed448 key, ``ES256`` an EC P-256 key, ``RS256`` an RSA key of at least 2048 bits. The ``kid`` of
a key is its RFC 7638 JWK thumbprint (SHA-256) unless configured.
"""

from __future__ import annotations

import re
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import (
    load_pem_private_key,
    load_pem_public_key,
)
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, OKPKey, RSAKey

from gateway.config.identity_model import AssertionAlg

__all__ = [
    "MIN_RSA_BITS",
    "JoseKey",
    "KeyProblem",
    "alg_of",
    "parse_public_keys",
    "parse_signing_key",
    "public_jwk",
]

JoseKey = OKPKey | ECKey | RSAKey
MIN_RSA_BITS: Final = 2048
"""RFC 7518 §3.3: a key of 2048 bits or larger MUST be used with RS256."""
_PEM_BLOCK: Final = re.compile(
    r"-----BEGIN ([A-Z0-9 ]+)-----\r?\n.*?\r?\n-----END \1-----", re.DOTALL
)
_MAX_PUBLISHED: Final = 16
"""Keys one ``publish_keys`` file may hold (a JWK Set stays small)."""


class KeyProblem(ValueError):
    """A key that cannot be used (fixed text, never the key)."""


def alg_of(key: Any) -> AssertionAlg:
    """The assertion algorithm a key (a ``cryptography`` key object) signs with, or raise."""
    if isinstance(key, ed25519.Ed25519PrivateKey | ed25519.Ed25519PublicKey):
        return "EdDSA"
    if isinstance(key, ed448.Ed448PrivateKey | ed448.Ed448PublicKey):
        return "EdDSA"
    if isinstance(key, ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey):
        if key.curve.name != "secp256r1":
            raise KeyProblem("an EC key must be on curve P-256 (ES256)")
        return "ES256"
    if isinstance(key, rsa.RSAPrivateKey | rsa.RSAPublicKey):
        if key.key_size < MIN_RSA_BITS:
            raise KeyProblem(f"an RSA key must have at least {MIN_RSA_BITS} bits (RS256)")
        return "RS256"
    raise KeyProblem("the key must be Ed25519/Ed448 (EdDSA), EC P-256 (ES256) or RSA (RS256)")


def _jose(pem: str, alg: AssertionAlg) -> JoseKey:
    try:
        if alg == "EdDSA":
            return OKPKey.import_key(pem)
        if alg == "ES256":
            return ECKey.import_key(pem)
        return RSAKey.import_key(pem)
    except (ValueError, TypeError, JoseError) as exc:
        raise KeyProblem("the key cannot be imported") from exc


def parse_signing_key(pem: str, alg: AssertionAlg) -> JoseKey:
    """The private key in ``pem`` for ``alg``, or raise :class:`KeyProblem`."""
    if "PUBLIC KEY-----" in pem and "PRIVATE KEY-----" not in pem:
        raise KeyProblem("is a public key: the gateway signs with the private key")
    try:
        loaded = load_pem_private_key(pem.encode("utf-8"), password=None)
    except TypeError as exc:
        raise KeyProblem(
            "is an encrypted private key: give an unencrypted PEM (protect the file instead)"
        ) from exc
    except (ValueError, UnicodeEncodeError) as exc:
        raise KeyProblem("is not a PEM private key (PKCS#8, or PKCS#1/SEC1)") from exc
    actual = alg_of(loaded)
    if actual != alg:
        raise KeyProblem(f"is a key for {actual}, not for alg {alg}")
    return _jose(pem, alg)


def parse_public_keys(text: str) -> list[tuple[JoseKey, AssertionAlg]]:
    """Every PEM key in ``text`` (public, or private: only its public half is ever used),
    with the algorithm it signs with. Empty text is no key (an empty rotation slot)."""
    blocks = [match.group(0) for match in _PEM_BLOCK.finditer(text)]
    if not blocks and text.strip():
        raise KeyProblem("holds no PEM key")
    if len(blocks) > _MAX_PUBLISHED:
        raise KeyProblem(f"holds more than {_MAX_PUBLISHED} keys")
    keys: list[tuple[JoseKey, AssertionAlg]] = []
    for block in blocks:
        try:
            if "PRIVATE KEY-----" in block:
                loaded: Any = load_pem_private_key(block.encode("utf-8"), password=None)
            else:
                loaded = load_pem_public_key(block.encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise KeyProblem("holds a PEM block that is not an unencrypted key") from exc
        alg = alg_of(loaded)
        keys.append((_jose(block, alg), alg))
    return keys


def public_jwk(key: JoseKey, alg: AssertionAlg, kid: str | None = None) -> dict[str, Any]:
    """The public JWK (RFC 7517 §4) with ``kid`` (default: the thumbprint), ``use`` and ``alg``."""
    return {
        **key.as_dict(private=False),
        "kid": kid or key.thumbprint(),
        "use": "sig",
        "alg": alg,
    }
