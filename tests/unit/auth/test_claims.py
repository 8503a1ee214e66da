"""RFC 7662 §2.2 claim checks: every refusal is InvalidToken; acceptance yields a Principal."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.auth.claims import MAX_IDENTITY_CHARS, ClaimRules, canonical_audience, check_claims
from gateway.errors import InvalidToken

NOW = 1_800_000_000.0
ISSUER = "https://id.example.com"
RESOURCE = "https://mcp.example.com/mcp"
RULES = ClaimRules(issuer=ISSUER, audiences=frozenset({RESOURCE}), skew_s=30)


def doc(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "active": True,
        "iss": ISSUER,
        "aud": RESOURCE,
        "exp": NOW + 300,
        "iat": NOW - 10,
        "sub": "alice",
        "client_id": "claude-code",
        "scope": "mcp:access  docs:read",
        "token_type": "Bearer",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not ...}


def check(d: dict[str, Any], rules: ClaimRules = RULES) -> Any:
    return check_claims(d, rules, now=NOW, fingerprint="0123456789ab")


class TestAccepted:
    def test_a_complete_active_token_becomes_a_principal(self) -> None:
        p = check(doc())
        assert (p.subject, p.client_id, p.issuer, p.fingerprint) == (
            "alice",
            "claude-code",
            ISSUER,
            "0123456789ab",
        )
        assert p.scopes == frozenset({"mcp:access", "docs:read"})
        assert p.expires_at == NOW + 300

    @pytest.mark.parametrize(
        "aud",
        [
            RESOURCE,
            [RESOURCE],
            ["https://other.example", RESOURCE],
            "HTTPS://MCP.Example.COM/mcp",
            "https://mcp.example.com:443/mcp",
        ],
        ids=["string", "array of one", "array of two", "uppercase scheme and host", "default port"],
    )
    def test_the_audience_matches_as_a_canonical_uri(self, aud: object) -> None:
        assert check(doc(aud=aud)).subject == "alice"

    @pytest.mark.parametrize(
        "token_type",
        ["Bearer", "bearer", "access_token", "urn:ietf:params:oauth:token-type:access_token", ...],
    )
    def test_access_token_types_and_an_absent_type_are_accepted(self, token_type: object) -> None:
        assert check(doc(token_type=token_type)).subject == "alice"

    def test_iss_may_be_absent_unless_required(self) -> None:
        assert check(doc(iss=...)).issuer == ISSUER
        with pytest.raises(InvalidToken, match="iss missing"):
            check(doc(iss=...), ClaimRules(ISSUER, frozenset({RESOURCE}), require_iss=True))

    def test_exp_within_the_skew_is_accepted_and_nbf_within_the_skew_too(self) -> None:
        assert check(doc(exp=NOW - 29, nbf=NOW + 30)).subject == "alice"

    def test_missing_sub_falls_back_to_client_id_only_when_configured(self) -> None:
        fallback = ClaimRules(ISSUER, frozenset({RESOURCE}), subject_fallback="client_id")
        assert check(doc(sub=...), fallback).subject == "claude-code"
        with pytest.raises(InvalidToken, match="sub missing"):
            check(doc(sub=..., client_id=...), fallback)

    def test_an_extra_configured_audience_is_accepted(self) -> None:
        rules = ClaimRules(ISSUER, frozenset({RESOURCE, "mcp-gateway"}))
        assert check(doc(aud=["mcp-gateway"]), rules).subject == "alice"


class TestRefused:
    @pytest.mark.parametrize(
        "overrides",
        [
            {"active": False},
            {"active": "true"},
            {"active": 1},
            {"active": ...},
            {"token_type": "refresh_token"},
            {"token_type": "DPoP"},
            {"token_type": 7},
            {"cnf": {"jkt": "x"}},
            {"iss": "https://evil.example.com"},
            {"iss": ISSUER + "/"},
            {"aud": ...},
            {"aud": "https://other.example.com/mcp"},
            {"aud": ["https://other.example.com/mcp", "x"]},
            {"aud": []},
            {"aud": 5},
            {"aud": [RESOURCE, 5]},
            {"aud": RESOURCE + "/"},
            {"aud": RESOURCE + "?x=1"},
            {"aud": RESOURCE + "#f"},
            {"aud": "https://mcp.example.com:x/mcp"},
            {"exp": ...},
            {"exp": NOW - 30},
            {"exp": NOW - 3600},
            {"exp": "soon"},
            {"exp": True},
            {"nbf": NOW + 31},
            {"iat": NOW + 31},
            {"nbf": "x"},
            {"sub": ...},
            {"sub": ""},
            {"sub": 7},
            {"scope": ["a"]},
        ],
        ids=[
            "inactive",
            "active as string",
            "active as 1",
            "active missing",
            "refresh token",
            "DPoP token",
            "token_type not a string",
            "sender-constrained",
            "wrong iss",
            "iss with trailing slash",
            "aud missing",
            "aud wrong string",
            "aud wrong array",
            "aud empty array",
            "aud a number",
            "aud array with a number",
            "aud trailing slash",
            "aud with query",
            "aud with fragment",
            "aud bad port",
            "exp missing",
            "exp at the skew edge",
            "expired",
            "exp a string",
            "exp a bool",
            "nbf in the future",
            "iat in the future",
            "nbf a string",
            "sub missing",
            "sub empty",
            "sub a number",
            "scope not a string",
        ],
    )
    def test_the_token_is_invalid(self, overrides: dict[str, Any]) -> None:
        with pytest.raises(InvalidToken):
            check(doc(**overrides))

    def test_a_refresh_token_as_issuers_introspect_it_fails(self) -> None:
        refresh = {
            "active": True,
            "token_type": "refresh_token",
            "client_id": "c",
            "sub": "alice",
            "exp": NOW + 86400,
        }
        with pytest.raises(InvalidToken):
            check(refresh)

    def test_refusal_details_never_echo_claim_values(self) -> None:
        with pytest.raises(InvalidToken) as info:
            check(doc(aud="https://attacker.example/secret-value"))
        assert "secret-value" not in str(info.value)
        assert "secret-value" not in info.value.detail


def test_rules_need_an_audience() -> None:
    with pytest.raises(ValueError, match="audience"):
        ClaimRules(ISSUER, frozenset())


def test_canonical_audience_keeps_plain_names_and_refuses_queries() -> None:
    assert canonical_audience("mcp-gateway") == "mcp-gateway"
    assert canonical_audience("HTTPS://A.example:443/x") == "https://a.example/x"
    assert canonical_audience("https://a.example/x?y") is None


class TestIdentitySizes:
    @pytest.mark.parametrize("claim", ["sub", "client_id"])
    def test_an_identity_claim_at_the_cap_is_accepted_and_one_more_character_refused(
        self, claim: str
    ) -> None:
        assert check(doc(**{claim: "a" * MAX_IDENTITY_CHARS})).subject is not None
        with pytest.raises(InvalidToken, match=f"{claim} too long"):
            check(doc(**{claim: "a" * (MAX_IDENTITY_CHARS + 1)}))

    def test_the_cap_is_256_characters_not_bytes(self) -> None:
        assert MAX_IDENTITY_CHARS == 256
        assert check(doc(sub="é" * 256)).subject == "é" * 256

    def test_a_long_client_id_is_refused_as_a_fallback_subject_too(self) -> None:
        rules = ClaimRules(
            issuer=ISSUER, audiences=frozenset({RESOURCE}), subject_fallback="client_id"
        )
        with pytest.raises(InvalidToken):
            check(doc(sub=..., client_id="c" * 257), rules)
