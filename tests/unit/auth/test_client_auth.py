"""RFC 6749 §2.3 / RFC 7523 §2.2 client authentication added to introspection requests."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc import jwt
from joserfc.jwk import ECKey

from gateway.auth.introspection import ASSERTION_LIFETIME_S, issuer_client_auth
from gateway.config import IssuerConfig, Secret

ISSUER = "https://id.example.com/realms/acme"


def apply(
    issuer: IssuerConfig, now: float = 1_800_000_000
) -> tuple[dict[str, str], dict[str, str]]:
    headers: dict[str, str] = {}
    form: dict[str, str] = {}
    form.update(issuer_client_auth(issuer, clock=lambda: now).apply(headers, ISSUER))
    return headers, form


def test_basic_form_encodes_both_parts_before_base64() -> None:
    issuer = IssuerConfig(
        url=ISSUER, client_id="gw:1", client_secret=Secret("p&ss:w+rd é", "literal")
    )
    headers, form = apply(issuer)
    raw = base64.b64decode(headers["Authorization"].removeprefix("Basic ")).decode()
    assert raw == "gw%3A1:p%26ss%3Aw%2Brd+%C3%A9"
    assert form == {}


def test_post_puts_the_credentials_in_the_form() -> None:
    issuer = IssuerConfig(
        url=ISSUER,
        client_id="gw",
        client_auth="client_secret_post",
        client_secret=Secret("s", "literal"),
    )
    headers, form = apply(issuer)
    assert headers == {}
    assert form == {"client_id": "gw", "client_secret": "s"}


def test_private_key_jwt_with_an_ec_key_signs_a_short_lived_assertion_for_the_issuer() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    issuer = IssuerConfig(
        url=ISSUER,
        client_id="gw",
        client_auth="private_key_jwt",
        private_key=Secret(pem, "literal"),
        private_key_id="ec-1",
        signing_alg="ES256",
    )
    _, first = apply(issuer)
    _, second = apply(issuer)
    assert first["client_assertion_type"] == (
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    )
    decoded = jwt.decode(first["client_assertion"], ECKey.import_key(pem), algorithms=["ES256"])
    claims = decoded.claims
    assert decoded.header["kid"] == "ec-1"
    assert (claims["iss"], claims["sub"], claims["aud"]) == ("gw", "gw", ISSUER)
    assert claims["exp"] - claims["iat"] == ASSERTION_LIFETIME_S
    other = jwt.decode(second["client_assertion"], ECKey.import_key(pem), algorithms=["ES256"])
    assert claims["jti"] != other.claims["jti"]
    assert "client_secret" not in first


def test_a_missing_credential_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="client_secret"):
        issuer_client_auth(IssuerConfig(url=ISSUER, client_id="gw"), clock=lambda: 0.0)
    with pytest.raises(ValueError, match="private_key"):
        issuer_client_auth(
            IssuerConfig(url=ISSUER, client_id="gw", client_auth="private_key_jwt"),
            clock=lambda: 0.0,
        )


@pytest.mark.parametrize(
    ("alg", "pem"),
    [
        ("RS256", "not a key"),
        ("ES256", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"),
    ],
    ids=["garbage", "truncated PEM"],
)
def test_an_unusable_private_key_fails_at_startup_without_quoting_it(alg: str, pem: str) -> None:
    issuer = IssuerConfig(
        url=ISSUER,
        client_id="gw",
        client_auth="private_key_jwt",
        private_key=Secret(pem, "literal"),
        signing_alg=alg,
    )
    with pytest.raises(ValueError, match="not a PEM private key") as info:
        issuer_client_auth(issuer, clock=lambda: 0.0)
    assert pem not in str(info.value)
    assert info.value.__cause__ is None
