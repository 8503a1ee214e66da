"""Revocation keys (issue 32 item 1): every spelling of one signed token is one key; distinct
tokens are distinct keys; an opaque token's key is its SHA-256. And how long a JWT's
revocation lasts (item 8)."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from gateway.auth.cache import token_digest
from gateway.config import IssuerConfig
from gateway.dev.issuer_keys import DevKeySet
from gateway.state.revocation_key import kept_until, revocation_key, revocation_target
from tests.support.jwt_forge import high_s, respell_ecdsa

ISSUER = "https://id.example.com"
NOW = 1_800_000_000.0


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def segment(doc: Any) -> str:
    return b64(json.dumps(doc, separators=(",", ":")).encode())


def es256(**claims: Any) -> str:
    keys = DevKeySet()
    keys.use(keys.add("EC"))
    doc = {"iss": ISSUER, "sub": "alice", "exp": NOW + 600, "jti": "j-1", **claims}
    return keys.sign({k: v for k, v in doc.items() if v is not None})


def with_lenient_padding(token: str) -> str:
    """The same token with '=' padding on every segment and '+/' for '-_'."""
    parts = token.split(".")
    padded = [p + "=" * (-len(p) % 4) for p in parts]
    return ".".join(p.replace("-", "+").replace("_", "/") for p in padded)


def with_set_low_bits(segment_text: str) -> str:
    """The same bytes with the unused low bits of the last character set (non-canonical)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    unused = {2: 4, 3: 2}.get(len(segment_text) % 4, 0)
    if not unused:
        return segment_text
    last = alphabet.index(segment_text[-1])
    return segment_text[:-1] + alphabet[last | ((1 << unused) - 1)]


class TestOneKeyPerSignedToken:
    @pytest.mark.parametrize("jti", ["j-1", None])
    def test_every_spelling_of_an_ecdsa_token_has_its_key(self, jti: str | None) -> None:
        token = es256(jti=jti)
        other = respell_ecdsa(token)
        assert high_s(other) != high_s(token)
        header, payload, signature = token.split(".")
        spellings = [
            other,
            with_lenient_padding(token),
            f"{with_set_low_bits(header)}.{with_set_low_bits(payload)}.{signature}",
            f"{header}.{payload}.{with_set_low_bits(signature)}",
            f"{header}.{payload}.{signature}~",  # a decoder that drops what is not base64
            f"{header}.{payload}.",
            # Java's String.split (Keycloak's JWSInput) drops trailing empty strings.
            f"{token}.",
            f"{token}...",
            f"{with_lenient_padding(other)}..",
        ]
        key = revocation_key(token)
        assert len(key) == 32 and key != token_digest(token)[0]
        assert {revocation_key(s) for s in spellings} == {key}

    def test_the_key_is_issuer_and_jti_when_both_are_there_else_the_signing_input(self) -> None:
        header = segment({"alg": "ES256", "typ": "at+jwt"})
        one = f"{header}.{segment({'iss': ISSUER, 'jti': 'j-1', 'sub': 'a'})}.x"
        same_jti = f"{header}.{segment({'iss': ISSUER, 'jti': 'j-1', 'sub': 'b'})}.y"
        other_issuer = f"{header}.{segment({'iss': ISSUER + '/', 'jti': 'j-1'})}.x"
        no_jti = f"{header}.{segment({'iss': ISSUER, 'sub': 'a'})}.x"
        no_jti_other = f"{header}.{segment({'iss': ISSUER, 'sub': 'b'})}.x"
        assert revocation_key(one) == revocation_key(same_jti)  # jti is unique per issuer
        keys = {revocation_key(t) for t in (one, other_issuer, no_jti, no_jti_other)}
        assert len(keys) == 4
        # A jti that is not a string, or an empty one, does not name the token.
        for bad in (7, ""):
            odd = f"{header}.{segment({'iss': ISSUER, 'jti': bad})}.x"
            signing_input = f"{header}.{segment({'iss': ISSUER, 'jti': bad})}"
            assert revocation_key(odd) == revocation_key(signing_input + ".other")
            assert revocation_key(odd) != revocation_key(one)

    def test_an_opaque_token_is_keyed_by_its_sha256(self) -> None:
        for token in ("opaque-token", "a.b.c", "v4.public.payload.footer", "a.b.c.d.e"):
            assert revocation_key(token) == hashlib.sha256(token.encode()).digest()
            assert revocation_target(token).expires_at is None

    def test_a_jwe_is_keyed_by_its_canonical_segments(self) -> None:
        header = segment({"alg": "RSA-OAEP", "enc": "A256GCM"})
        jwe = f"{header}.{b64(b'k' * 32)}.{b64(b'iv' * 6)}.{b64(b'cipher')}.{b64(b't' * 16)}"
        parts = jwe.split(".")
        variant = ".".join(p + "=" * (-len(p) % 4) for p in parts)
        assert revocation_key(variant) == revocation_key(jwe)
        assert revocation_key(jwe + "..") == revocation_key(jwe)
        assert revocation_key(jwe) != hashlib.sha256(jwe.encode()).digest()
        tampered = ".".join([*parts[:3], b64(b"cipheR"), parts[4]])
        assert revocation_key(tampered) != revocation_key(jwe)

    def test_the_target_carries_iss_and_exp_for_the_revocation_lifetime(self) -> None:
        target = revocation_target(es256())
        assert (target.issuer, target.expires_at) == (ISSUER, NOW + 600)
        for exp in ("soon", True, None):
            assert revocation_target(es256(exp=exp)).expires_at is None


class TestKeptUntil:
    ISSUERS = (
        IssuerConfig(url=ISSUER, tokens="jwt", clock_skew_s=30, max_token_lifetime_s=3600),
        IssuerConfig(
            url="https://other.example.com",
            tokens="jwt+introspection",
            clock_skew_s=60,
            max_token_lifetime_s=7200,
        ),
    )

    def test_until_exp_plus_the_issuers_skew_bounded_by_its_max_lifetime(self) -> None:
        assert kept_until(self.ISSUERS, ISSUER, NOW + 600, NOW) == NOW + 630
        assert kept_until(self.ISSUERS, ISSUER, NOW + 10**9, NOW) == NOW + 3600 + 60
        # An iss no issuer has takes the most lenient bounds.
        assert kept_until(self.ISSUERS, "https://nobody", NOW + 10**9, NOW) == NOW + 7200 + 120
        assert kept_until(self.ISSUERS, None, NOW + 600, NOW) == NOW + 660
        # tokens: introspection refuses no far exp, so nothing bounds its revocation but exp.
        introspected = (IssuerConfig(url=ISSUER, tokens="introspection", clock_skew_s=30),)
        assert kept_until(introspected, ISSUER, NOW + 10**9, NOW) == NOW + 10**9 + 30
        assert kept_until(introspected, "https://nobody", NOW + 10**9, NOW) == NOW + 10**9 + 30
        # No exp (an opaque token): nothing beyond admin.revocation_ttl_s.
        assert kept_until(self.ISSUERS, ISSUER, None, NOW) == 0.0
