"""The one JWS signature check: :func:`verifier` of one (``alg``, key), called per signature.

What may verify what is joserfc's decision, taken once when the verifier is made (its
algorithm's ``check_key``: the key type and curve the algorithm needs, the key's own ``use``,
``alg`` and ``key_ops`` members). The verification itself is the ``cryptography`` call that
joserfc's algorithm makes (RFC 7518 §3.3-§3.5, RFC 8037 §3.1, RFC 9864), made directly: a DPoP
proof is verified on every request with a key imported once (:mod:`.dpop`), where joserfc would
check the key again and look up its native key for each signature.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from joserfc.errors import JoseError
from joserfc.jws import JWSRegistry

from .jwks import PublicKey

__all__ = ["Verifier", "verifier"]

Verifier = Callable[[bytes, bytes], bool]
"""``verify(signing_input, signature)``: whether the signature is valid."""

_HASHES: Final[dict[str, type[hashes.HashAlgorithm]]] = {
    "256": hashes.SHA256,
    "384": hashes.SHA384,
    "512": hashes.SHA512,
}


def _never(signing_input: bytes, signature: bytes) -> bool:
    return False


def verifier(alg: str, key: PublicKey) -> Verifier:
    """How ``key`` verifies signatures under ``alg`` (an algorithm already allowed); a key
    that cannot (wrong type or curve, ``use`` or ``alg`` members against it) verifies none."""
    algorithm = JWSRegistry.algorithms.get(alg)
    if algorithm is None:
        return _never
    try:
        algorithm.check_key(key)
        native = key.get_op_key("verify")
    except (JoseError, ValueError, TypeError):
        return _never
    if isinstance(native, ec.EllipticCurvePublicKey) and alg.startswith("ES"):
        return _ecdsa(native, _HASHES[alg[2:]]())
    if isinstance(native, rsa.RSAPublicKey) and alg[:2] in ("RS", "PS"):
        digest = _HASHES[alg[2:]]()
        pad: padding.AsymmetricPadding = (
            padding.PKCS1v15()
            if alg.startswith("RS")
            # RFC 7518 §3.5: MGF1 with the same hash, a salt as long as the hash's output.
            else padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size)
        )
        return _rsa(native, pad, digest)
    if isinstance(native, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return _eddsa(native)
    return _never


def _ecdsa(key: ec.EllipticCurvePublicKey, digest: hashes.HashAlgorithm) -> Verifier:
    size = (key.curve.key_size + 7) // 8
    scheme = ec.ECDSA(digest)

    def verify(signing_input: bytes, signature: bytes) -> bool:
        # RFC 7518 §3.4: R and S as fixed-size big-endian integers, concatenated.
        if len(signature) != 2 * size:
            return False
        r = int.from_bytes(signature[:size], "big")
        s = int.from_bytes(signature[size:], "big")
        try:
            key.verify(encode_dss_signature(r, s), signing_input, scheme)
        except (InvalidSignature, ValueError, TypeError):
            return False
        return True

    return verify


def _rsa(
    key: rsa.RSAPublicKey, pad: padding.AsymmetricPadding, digest: hashes.HashAlgorithm
) -> Verifier:
    def verify(signing_input: bytes, signature: bytes) -> bool:
        try:
            key.verify(signature, signing_input, pad, digest)
        except (InvalidSignature, ValueError, TypeError):
            return False
        return True

    return verify


def _eddsa(key: ed25519.Ed25519PublicKey | ed448.Ed448PublicKey) -> Verifier:
    def verify(signing_input: bytes, signature: bytes) -> bool:
        try:
            key.verify(signature, signing_input)
        except (InvalidSignature, ValueError, TypeError):
            return False
        return True

    return verify
