"""Issuer answers and discovery URLs: bounded JSON, RFC 8414 path insertion, endpoint rules."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.auth.bearer import extract_bearer
from gateway.auth.claims import ClaimRules, check_claims
from gateway.auth.introspection import oauth_error_code
from gateway.auth.issuer_metadata import DiscoveryFailed, check_endpoint, metadata_urls
from gateway.config import IssuerConfig
from gateway.errors import InvalidToken, NoCredentials, TokenInQuery
from gateway.seams import AuthRequest


class TestOAuthErrorCode:
    @pytest.mark.parametrize(
        ("body", "code"),
        [
            (b'{"error":"invalid_token"}', "invalid_token"),
            (b'{"error":"' + b"a" * 64 + b'"}', "a" * 64),
            (b'{"error":"' + b"a" * 65 + b'"}', "other"),
            (b'{"error":"Invalid Token"}', "other"),
            (b'{"error":"bad\\nline"}', "other"),
            (b'{"error":7}', "other"),
            (b'{"error_description":"x"}', None),
            (b"not json", None),
            (b"[]", None),
        ],
    )
    def test_the_logged_code_is_bounded(self, body: bytes, code: str | None) -> None:
        assert oauth_error_code(body) == code


class TestDiscoveryUrls:
    def test_an_issuer_with_a_path_gets_insertion_then_oidc_insertion_then_appending(
        self,
    ) -> None:
        assert metadata_urls("https://id.example.com/realms/acme/") == [
            "https://id.example.com/.well-known/oauth-authorization-server/realms/acme",
            "https://id.example.com/.well-known/openid-configuration/realms/acme",
            "https://id.example.com/realms/acme/.well-known/openid-configuration",
        ]

    def test_an_issuer_without_a_path_gets_two_urls(self) -> None:
        assert metadata_urls("https://id.example.com") == [
            "https://id.example.com/.well-known/oauth-authorization-server",
            "https://id.example.com/.well-known/openid-configuration",
        ]


class TestEndpointRules:
    ISSUER = IssuerConfig(url="https://id.example.com/realms/acme", client_id="gw")

    def test_an_https_endpoint_on_the_issuer_origin_is_accepted(self) -> None:
        url = "https://id.example.com:443/realms/acme/introspect"
        assert check_endpoint(url, self.ISSUER) == url

    @pytest.mark.parametrize(
        "endpoint",
        [
            None,
            "",
            5,
            "http://id.example.com/introspect",
            "https://evil.example.com/introspect",
            "https://id.example.com:8443/introspect",
            "https://id.example.com.evil.com/x",
            "/introspect",
            "https://id.example.com:bad/x",
            "https://evil@id.example.com/x",
            "https://a:b@id.example.com/x",
            "https://id.example.com/x#f",
            "https://id.example.com/x#",
            "https://id.example.com\\@evil.example/x",
            "https://id.example.com/in trospect",
            "https://id.example.com/x\n",
            "https://[::1/x",
        ],
        ids=[
            "missing",
            "empty",
            "not a string",
            "plain http",
            "other host",
            "other port",
            "suffix host",
            "relative",
            "bad port",
            "userinfo",
            "user and password",
            "fragment",
            "empty fragment",
            "backslash",
            "space",
            "newline",
            "bad ipv6",
        ],
    )
    def test_other_endpoints_are_refused(self, endpoint: object) -> None:
        with pytest.raises(DiscoveryFailed):
            check_endpoint(endpoint, self.ISSUER)

    def test_plain_http_is_allowed_only_on_loopback_with_the_development_flag(self) -> None:
        dev = IssuerConfig(url="http://127.0.0.1:8080", client_id="gw", allow_insecure_http=True)
        assert check_endpoint("http://127.0.0.1:8080/introspect", dev)
        strict = IssuerConfig(url="http://127.0.0.1:8080", client_id="gw")
        with pytest.raises(DiscoveryFailed, match="https"):
            check_endpoint("http://127.0.0.1:8080/introspect", strict)


RULES = ClaimRules("https://id.example.com", frozenset({"https://mcp.example.com/mcp"}))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)
CLAIMS = st.dictionaries(
    st.sampled_from(
        [
            "active",
            "iss",
            "aud",
            "exp",
            "nbf",
            "iat",
            "sub",
            "client_id",
            "scope",
            "token_type",
            "cnf",
        ]
    ),
    JSON_VALUES | st.sampled_from([True, "https://mcp.example.com/mcp", 1.9e9, "alice"]),
)


@settings(max_examples=300, deadline=None)
@given(CLAIMS)
def test_any_introspection_answer_yields_a_principal_or_invalid_token(doc: dict[str, Any]) -> None:
    try:
        principal = check_claims(doc, RULES, now=1.8e9, fingerprint="f")
    except InvalidToken:
        return
    assert doc["active"] is True
    assert principal.subject
    assert principal.expires_at > 1.8e9 - RULES.skew_s


@pytest.mark.parametrize("exp", [float("inf"), float("nan"), 10**400], ids=["inf", "nan", "10^400"])
def test_a_non_finite_exp_is_refused(exp: object) -> None:
    doc = {"active": True, "aud": "https://mcp.example.com/mcp", "exp": exp, "sub": "a"}
    with pytest.raises(InvalidToken, match="finite"):
        check_claims(doc, RULES, now=1.8e9, fingerprint="f")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=3), st.frozensets(st.text(max_size=12), max_size=3))
def test_any_header_yields_a_token_or_one_of_the_bearer_rows(
    headers: list[str], query: frozenset[str]
) -> None:
    request = AuthRequest(tuple(headers), query, "192.0.2.1")
    try:
        token = extract_bearer(request)
    except (TokenInQuery, NoCredentials, InvalidToken):
        return
    assert token and token.isascii() and " " not in token
