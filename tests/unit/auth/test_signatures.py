"""The one JWS signature check (gateway/auth/signatures.py): every algorithm the gateway may be
configured with verifies what joserfc signed and nothing else; a key that joserfc would not use
for the algorithm verifies nothing."""

from __future__ import annotations

import base64
import warnings

import pytest
from joserfc import jws
from joserfc.errors import SecurityWarning
from joserfc.jwk import ECKey, OKPKey, RSAKey

from gateway.auth.signatures import verifier
from gateway.config.issuer_model import JWT_ALGORITHMS

KEYS = {
    "RS": lambda: RSAKey.generate_key(2048, private=True),
    "PS": lambda: RSAKey.generate_key(2048, private=True),
    "ES256": lambda: ECKey.generate_key("P-256", private=True),
    "ES384": lambda: ECKey.generate_key("P-384", private=True),
    "ES512": lambda: ECKey.generate_key("P-521", private=True),
    "EdDSA": lambda: OKPKey.generate_key("Ed25519", private=True),
    "Ed25519": lambda: OKPKey.generate_key("Ed25519", private=True),
    "Ed448": lambda: OKPKey.generate_key("Ed448", private=True),
}


def _key(alg: str) -> RSAKey | ECKey | OKPKey:
    return (KEYS[alg] if alg in KEYS else KEYS[alg[:2]])()


def _signed(alg: str, key: RSAKey | ECKey | OKPKey) -> tuple[bytes, bytes]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)  # "EdDSA" is deprecated by RFC 9864
        compact = jws.serialize_compact({"alg": alg}, b"payload", key, algorithms=[alg])
    head, payload, signature = compact.split(".")
    return f"{head}.{payload}".encode(), base64.urlsafe_b64decode(signature + "==")


@pytest.mark.parametrize("alg", JWT_ALGORITHMS)
def test_every_algorithm_verifies_its_own_signature_and_nothing_else(alg: str) -> None:
    key = _key(alg)
    signing_input, signature = _signed(alg, key)
    public = type(key).import_key(key.as_dict(private=False))
    verify = verifier(alg, public)
    assert verify(signing_input, signature)
    assert not verify(signing_input + b"x", signature)
    assert not verify(signing_input, signature[:-1] + bytes([signature[-1] ^ 1]))
    assert not verify(signing_input, signature[:-1])
    assert not verify(signing_input, b"")


def test_a_key_of_another_type_or_curve_verifies_nothing() -> None:
    ec = ECKey.generate_key("P-256", private=True)
    signing_input, signature = _signed("ES256", ec)
    public = ECKey.import_key(ec.as_dict(private=False))
    assert verifier("ES256", public)(signing_input, signature)
    assert not verifier("ES384", public)(signing_input, signature)  # P-256 is not ES384's
    assert not verifier("RS256", public)(signing_input, signature)
    assert not verifier("HS256", public)(signing_input, signature)
    assert not verifier("none", public)(signing_input, signature)
    assert not verifier("XX999", public)(signing_input, signature)


@pytest.mark.parametrize("member", [{"use": "enc"}, {"alg": "ES384"}, {"key_ops": ["encrypt"]}])
def test_a_key_whose_own_members_refuse_the_use_verifies_nothing(member: dict[str, object]) -> None:
    ec = ECKey.generate_key("P-256", private=True)
    signing_input, signature = _signed("ES256", ec)
    public = ECKey.import_key({**ec.as_dict(private=False), **member})
    assert not verifier("ES256", public)(signing_input, signature)
