"""The JWT pieces on their own: the compact-JWS reader, JWK Set vetting, claim mapping, verifier."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest

from gateway.auth.jwks import JwksCache, JwksFailed, KeySet, parse_jwks, refresh_interval
from gateway.auth.jws import parse_compact
from gateway.auth.jwt_claims import JwtRules, check_jwt_claims
from gateway.auth.jwt_verifier import JwtVerifier
from gateway.config import IssuerConfig, RolesConfig
from gateway.dev.issuer_keys import DevKeySet, b64url
from gateway.errors import InvalidToken, IssuerUnavailable
from gateway.outbound.client import Outbound

ISSUER = "https://id.example.com"
RESOURCE = "https://mcp.example.com/mcp"
ALGS = ("RS256", "PS256", "ES256", "EdDSA")


def segment(doc: Any) -> str:
    return b64url(json.dumps(doc).encode())


def claims(**changes: Any) -> dict[str, Any]:
    now = int(time.time())
    doc: dict[str, Any] = {
        "iss": ISSUER,
        "sub": "alice",
        "aud": RESOURCE,
        "exp": now + 300,
        "iat": now,
        "client_id": "cli",
        "scope": "mcp:access",
    }
    for key, value in changes.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = value
    return doc


class TestCompactReader:
    @pytest.mark.parametrize(
        "token",
        [
            "opaque-token_value",
            "a.b",
            "a.b.c.d.e",
            "!!.b.c",
            f"{b64url(b'not json')}.e30.c2ln",
            f"{segment({'typ': 'JWT'})}.{segment({'iss': ISSUER})}.c2ln",
        ],
        ids=["opaque", "two parts", "JWE-like", "not base64url", "header not JSON", "no alg"],
    )
    def test_what_is_not_a_jws_is_left_to_the_introspecting_issuers(self, token: str) -> None:
        assert parse_compact(token) is None

    def test_a_jws_is_split_and_decoded(self) -> None:
        header, payload = segment({"alg": "RS256", "kid": "k1"}), segment(claims())
        parsed = parse_compact(f"{header}.{payload}.c2lnbmF0dXJl")
        assert parsed is not None
        assert (parsed.alg, parsed.iss, parsed.signature) == ("RS256", ISSUER, b"signature")
        assert parsed.signing_input == f"{header}.{payload}".encode()

    @pytest.mark.parametrize(
        ("payload", "signature"),
        [
            (b64url(b"[1, 2]"), "c2ln"),
            (b64url(b'{"iss": "a", "iss": "b"}'), "c2ln"),
            (b64url(b'{"exp": NaN}'), "c2ln"),
            (segment(claims()), "c2lnbmF0dXJl+"),
            # 'c2lnbh' decodes to the same bytes as 'c2lnbg' ("sign"): a second spelling.
            (segment(claims()), "c2lnbh"),
        ],
        ids=["payload not an object", "duplicate iss", "NaN", "not base64url", "non-canonical"],
    )
    def test_a_malformed_jws_is_refused_without_routing(self, payload: str, signature: str) -> None:
        with pytest.raises(InvalidToken):
            parse_compact(f"{segment({'alg': 'RS256'})}.{payload}.{signature}")


class TestKeySetVetting:
    def test_only_public_signature_keys_of_safe_types_are_kept(self) -> None:
        keys = DevKeySet()
        rsa, ec = keys.kids[0], keys.add("EC")
        public = {k["kid"]: k for k in keys.jwks()["keys"]}
        private = {**keys.key(rsa).as_dict(private=True), "kid": "leaked"}
        members = [
            public[rsa],
            public[ec],
            private,
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {**public[rsa], "kid": "enc", "use": "enc"},
            {**public[rsa], "kid": "ops", "key_ops": ["encrypt"]},
            {**public[rsa], "kid": "hs", "alg": "HS256"},
            {**public[ec], "kid": "curve", "crv": "secp256k1"},
            {"kty": "RSA", "kid": "small", "e": "AQAB", "n": b64url(b"\xc3" * 128)},
            "not an object",
        ]
        found, skipped = parse_jwks(json.dumps({"keys": members}).encode(), ALGS)
        assert (found.kids, skipped) == (frozenset({rsa, ec}), 8)

    @pytest.mark.parametrize(
        "body", [b"<html>", b"[]", b'{"keys": {}}', b'{"keys": []}', b'{"keys": [{"kty": "oct"}]}']
    )
    def test_a_set_without_a_usable_key_is_a_failed_fetch(self, body: bytes) -> None:
        with pytest.raises(JwksFailed):
            parse_jwks(body, ALGS)

    def test_find_matches_kid_type_curve_and_declared_alg(self) -> None:
        keys = DevKeySet()
        rsa, ec = keys.kids[0], keys.add("EC")
        found, _ = parse_jwks(json.dumps(keys.jwks()).encode(), ALGS)
        assert found.find(rsa, "RS256") is not None
        assert found.find(rsa, "PS256") is None  # the key says alg RS256
        assert found.find(rsa, "ES256") is None  # an RSA key never verifies ECDSA
        assert found.find(ec, "ES256") is not None
        assert found.find(ec, "ES384") is None  # P-256 is not ES384's curve
        assert found.find("other", "RS256") is None
        assert found.find(None, "ES256") is not None  # exactly one EC key: unambiguous
        found_two, _ = parse_jwks(
            json.dumps(
                {"keys": [*keys.jwks()["keys"], {**keys.jwks()["keys"][1], "kid": "twin"}]}
            ).encode(),
            ALGS,
        )
        assert found_two.find(None, "ES256") is None  # two candidates: no guessing
        assert KeySet().find(None, "RS256") is None

    @pytest.mark.parametrize(
        ("headers", "expected"),
        [
            ({"Cache-Control": "public, max-age=600"}, 600),
            ({"Cache-Control": "max-age=5"}, 60),
            ({"Cache-Control": "max-age=999999"}, 3600),
            ({"Cache-Control": "no-store"}, 60),
            ({"Cache-Control": "no-cache, max-age=900"}, 60),
            ({}, 3600),
            ({"Expires": "not a date"}, 60),
        ],
    )
    def test_refresh_follows_cache_headers_within_bounds(
        self, headers: dict[str, str], expected: float
    ) -> None:
        assert refresh_interval(headers, lower=60, upper=3600) == expected


class TestClaimMapping:
    RULES = JwtRules.for_issuer(RESOURCE, IssuerConfig(url=ISSUER, tokens="jwt"))

    def check(self, doc: dict[str, Any], rules: JwtRules | None = None) -> Any:
        return check_jwt_claims(doc, rules or self.RULES, now=time.time(), fingerprint="fp")

    def test_scope_and_scp_are_united_and_the_method_is_jwt(self) -> None:
        principal = self.check(claims(scp=["notes.read", "notes.write"]))
        assert principal.scopes == {"mcp:access", "notes.read", "notes.write"}
        assert (principal.subject, principal.client_id, principal.auth_method) == (
            "alice",
            "cli",
            "jwt",
        )

    def test_scope_prefix_qualifies_the_scopes_but_not_the_roles(self) -> None:
        roles = replace(self.RULES.claims, roles=RolesConfig(("roles",), "role:"))
        rules = replace(self.RULES, scope_prefix="api://app/", claims=roles)
        principal = self.check(
            claims(scope=None, scp="mcp.access notes.read", roles=["Ops"]), rules
        )
        assert principal.scopes == {"api://app/mcp.access", "api://app/notes.read", "role:Ops"}

    def test_roles_join_the_scopes_with_their_prefix_from_a_nested_path(self) -> None:
        roles = replace(self.RULES.claims, roles=RolesConfig(("realm_access", "roles"), "role:"))
        rules = replace(self.RULES, claims=roles)
        principal = self.check(claims(realm_access={"roles": ["admin"]}), rules)
        assert principal.scopes == {"mcp:access", "role:admin"}
        with pytest.raises(InvalidToken):
            self.check(claims(realm_access={"roles": "admin"}), rules)

    def test_subject_and_client_id_come_from_the_configured_claims(self) -> None:
        rules = replace(self.RULES, subject_claim="oid", client_id_claims=("azp", "appid"))
        principal = self.check(
            claims(oid="object-id", appid="app", azp=None, client_id=None), rules
        )
        assert (principal.subject, principal.client_id) == ("object-id", "app")
        with pytest.raises(InvalidToken, match="oid missing"):
            self.check(claims(), rules)
        fallback = replace(rules, claims=replace(rules.claims, subject_fallback="client_id"))
        assert self.check(claims(appid="daemon"), fallback).subject == "daemon"

    @pytest.mark.parametrize(
        "change",
        [
            {"nonce": "n"},
            {"at_hash": "x"},
            {"typ": "Refresh"},
            {"typ": "ID"},
            {"token_use": "id"},
            {"cnf": {"jkt": "x"}},
            {"iss": ISSUER + "/"},
            {"scp": ["two", "with space"]},
            {"scope": 7},
            {"scp": [f"s{i}" for i in range(300)]},
            {"sub": "x" * 257},
        ],
    )
    def test_what_is_not_a_plain_access_token_for_us_is_refused(self, change: Any) -> None:
        with pytest.raises(InvalidToken):
            self.check(claims(**change))

    def test_a_keycloak_bearer_typ_and_a_cognito_access_token_use_pass(self) -> None:
        assert self.check(claims(typ="Bearer", token_use="access")).subject == "alice"

    def test_an_exp_further_ahead_than_max_token_lifetime_s_is_refused(self) -> None:
        """The bound of a revocation kept until ``exp`` (issue 32 item 8): at the bound plus the
        skew it passes, one second past it the token is refused."""
        now = time.time()
        rules = JwtRules.for_issuer(
            RESOURCE, IssuerConfig(url=ISSUER, tokens="jwt", max_token_lifetime_s=3600)
        )
        skew = rules.claims.skew_s
        ok = check_jwt_claims(
            claims(exp=int(now) + 3600 + skew), rules, now=int(now), fingerprint="f"
        )
        assert ok.expires_at == int(now) + 3600 + skew
        with pytest.raises(InvalidToken, match="max_token_lifetime_s"):
            check_jwt_claims(
                claims(exp=int(now) + 3601 + skew), rules, now=int(now), fingerprint="f"
            )
        assert self.RULES.max_lifetime_s == 86400  # the default


class TestVerifier:
    @staticmethod
    def verifier(keys: DevKeySet, **issuer: Any) -> JwtVerifier:
        config = IssuerConfig(url=ISSUER, tokens="jwt", jwks_uri=ISSUER + "/jwks", **issuer)
        cache = JwksCache(config, Outbound())
        cache.keys, _ = parse_jwks(json.dumps(keys.jwks()).encode(), ALGS)
        return JwtVerifier(config, JwtRules.for_issuer(RESOURCE, config), cache, clock=time.time)

    @staticmethod
    async def verify(verifier: JwtVerifier, token: str) -> Any:
        parsed = parse_compact(token)
        assert parsed is not None
        return await verifier.verify(parsed, len(token), "fp")

    @pytest.mark.parametrize("kind", ["RSA", "EC", "OKP"])
    async def test_each_default_algorithm_family_verifies(self, kind: Any) -> None:
        keys = DevKeySet()
        keys.use(keys.add(kind))
        principal = await self.verify(self.verifier(keys), keys.sign(claims()))
        assert principal.subject == "alice"

    async def test_typ_compares_as_a_media_type_and_null_admits_none(self) -> None:
        keys = DevKeySet()
        verifier = self.verifier(keys)
        await self.verify(verifier, keys.sign(claims(), header={"typ": "application/AT+JWT"}))
        with pytest.raises(InvalidToken, match="typ"):
            await self.verify(verifier, keys.sign(claims(), header={"typ": None}))
        okta = self.verifier(keys, accept_typ=("application/at+jwt", None))
        await self.verify(okta, keys.sign(claims(), header={"typ": None}))

    async def test_an_algorithm_outside_the_issuers_list_is_refused(self) -> None:
        keys = DevKeySet()
        token = keys.sign(claims())
        with pytest.raises(InvalidToken, match="alg not allowed"):
            await self.verify(self.verifier(keys, algorithms=("ES256",)), token)

    async def test_no_usable_key_is_issuer_unavailable_not_invalid_token(self) -> None:
        keys = DevKeySet()
        verifier = self.verifier(keys)
        verifier._jwks.keys = KeySet()
        verifier._jwks.uri = None  # nothing to fetch: the set stays empty
        with pytest.raises(IssuerUnavailable):
            await self.verify(verifier, keys.sign(claims()))
