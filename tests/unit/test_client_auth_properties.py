"""OAuth client authentication (gateway/outbound/client_auth.py), by property.

- ``client_secret_basic``: for any client id and secret (``:``, ``%``, ``+``, spaces, non-ASCII
  included) the header reads back, through aiohttp's Basic parser and the form decoding RFC 6749
  §2.3.1 and Appendix B prescribe (what an issuer such as oidc-provider does), as the same id
  and secret.
- ``client_secret_post``: the fields, form-encoded as :func:`post_oauth_form` sends them, parse
  back to the same id and secret.
- ``private_key_jwt``: every assertion verifies with the public key alone, under PyJWT (not the
  gateway's JOSE code), with ``iss`` = ``sub`` = the client id, ``aud`` = the audience asked
  for, the lifetime of :data:`ASSERTION_LIFETIME_S` from the clock, ``kid`` exactly when
  configured, and a ``jti`` never repeated.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote_plus, urlencode

import aiohttp
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.config import Secret
from gateway.outbound.client_auth import (
    ASSERTION_LIFETIME_S,
    JWT_BEARER_ASSERTION,
    ClientAuthentication,
    signing_key,
)

PROPERTY = settings(
    max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
awkward = st.sampled_from([":", "%", "+", " ", "%3A", "&", "=", "é", "日本", "\x00", "\u2028"])
texts = st.lists(st.text(max_size=6) | awkward, max_size=5).map("".join)
names = texts.filter(
    bool
)  # configured client ids are never empty (min_length 1), audiences are URLs

_EC = ec.generate_private_key(ec.SECP256R1())
_RSA = rsa.generate_private_key(public_exponent=65537, key_size=2048)
KEYS: dict[str, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey] = {
    "ES256": _EC,
    "RS256": _RSA,
    "PS256": _RSA,
}
PEMS = {
    alg: key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    for alg, key in KEYS.items()
}
SIGNING = {alg: signing_key(pem, alg, name="test") for alg, pem in PEMS.items()}
"""Parsed once: checking an RSA private key costs about 0.1 s."""


def read_basic(header: str) -> tuple[str, str]:
    """What an authorization server reads: the Basic credentials, each form-decoded."""
    credentials = aiohttp.BasicAuth.decode(header, encoding="ascii")
    return unquote_plus(credentials.login), unquote_plus(credentials.password)


@PROPERTY
@given(texts, texts)
def test_client_secret_basic_reads_back_as_the_same_id_and_secret(
    client_id: str, secret: str
) -> None:
    auth = ClientAuthentication(
        client_id, "client_secret_basic", clock=lambda: 0.0, secret=Secret(secret, "literal")
    )
    headers: dict[str, str] = {}
    assert auth.apply(headers, "https://as.example") == []
    assert read_basic(headers["Authorization"]) == (client_id, secret)


@PROPERTY
@given(texts, texts, st.lists(st.tuples(texts, texts), max_size=3))
def test_client_secret_post_fields_read_back_beside_the_request_form(
    client_id: str, secret: str, form: list[tuple[str, str]]
) -> None:
    auth = ClientAuthentication(
        client_id, "client_secret_post", clock=lambda: 0.0, secret=Secret(secret, "literal")
    )
    headers: dict[str, str] = {}
    fields = form + auth.apply(headers, "https://as.example")
    body = urlencode(fields).encode("ascii")  # as post_oauth_form encodes the body
    assert headers == {}
    assert parse_qsl(body.decode("ascii"), keep_blank_values=True) == fields
    assert fields[-2:] == [("client_id", client_id), ("client_secret", secret)]


@settings(PROPERTY, max_examples=60)
@given(
    st.sampled_from(sorted(KEYS)),
    names,
    names,
    st.none() | st.text(min_size=1, max_size=8),
    st.integers(min_value=1, max_value=2**33),  # authlib reads an iat of 0 as "now"
)
def test_private_key_jwt_assertions_verify_with_the_public_key_and_never_repeat_a_jti(
    alg: str, client_id: str, audience: str, key_id: str | None, now: int
) -> None:
    auth = ClientAuthentication(
        client_id,
        "private_key_jwt",
        clock=lambda: now + 0.75,
        key=SIGNING[alg],
        alg=alg,
        key_id=key_id,
    )
    jtis = set()
    for _ in range(3):
        headers: dict[str, str] = {}
        fields = dict(auth.apply(headers, audience))
        assert headers == {}
        assert fields["client_assertion_type"] == JWT_BEARER_ASSERTION
        assert fields["client_id"] == client_id
        token = fields["client_assertion"]
        header = jwt.get_unverified_header(token)
        assert header["alg"] == alg and header.get("kid") == key_id
        claims = jwt.decode(
            token,
            KEYS[alg].public_key(),
            algorithms=[alg],
            audience=audience,
            issuer=client_id,
            options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
        )
        assert (claims["iss"], claims["sub"], claims["aud"]) == (client_id, client_id, audience)
        assert (claims["iat"], claims["exp"]) == (now, now + ASSERTION_LIFETIME_S)
        jtis.add(claims["jti"])
    assert len(jtis) == 3
