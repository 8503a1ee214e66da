"""Per-issuer scope vocabularies (``issuer.scope_map``): inward to the policy's names, outward
to the issuer's spelling, and the derivation ``policy explain`` prints."""

from __future__ import annotations

import time
from typing import Any

import pytest

from gateway.auth.claims import ClaimRules, check_claims
from gateway.auth.jwt_claims import JwtRules, check_jwt_claims, derive
from gateway.auth.scopes import IDENTITY, DerivedScope, ScopeVocabulary
from gateway.config import IssuerConfig, RolesConfig, ScopeMapEntry
from gateway.errors import InvalidToken

ISSUER = "https://login.example.com/tenant/v2.0"
RESOURCE = "https://mcp.example.com/mcp"
API = "api://66666666-7777-8888-9999-000000000000/"
MAP = (
    ScopeMapEntry(f"{API}mcp.access", "mcp:access"),
    ScopeMapEntry(f"{API}notes.read", "notes:read"),
    ScopeMapEntry(f"{API}Notes.Reader", "notes:read"),  # an app role naming the same scope
)


def entra(**overrides: Any) -> IssuerConfig:
    settings: dict[str, Any] = {
        "url": ISSUER,
        "tokens": "jwt",
        "audiences": ("api-client",),
        "scope_claims": ("scp",),
        "scope_prefix": API,
        "roles": RolesConfig(("roles",), API),
        "scope_map": MAP,
    }
    return IssuerConfig(**{**settings, **overrides})


def claims(**extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": ISSUER, "aud": "api-client", "exp": now + 60, "sub": "s", **extra}


class TestVocabulary:
    def test_inward_maps_keys_and_passes_everything_else(self) -> None:
        vocabulary = ScopeVocabulary(MAP)
        assert vocabulary.inward(f"{API}mcp.access") == "mcp:access"
        assert vocabulary.inward(f"{API}other") == f"{API}other"
        assert vocabulary.inward("mcp:access") == "mcp:access"

    def test_outward_names_the_first_key_of_a_target_in_order_without_duplicates(self) -> None:
        vocabulary = ScopeVocabulary(MAP)
        assert vocabulary.outward(["mcp:access", "notes:read", "admin", "notes:read"]) == (
            f"{API}mcp.access",
            f"{API}notes.read",
            "admin",
        )

    def test_scope_map_only_drops_every_spelling_that_is_no_key(self) -> None:
        vocabulary = ScopeVocabulary.for_issuer(entra(scope_map_only=True))
        assert vocabulary.inward(f"{API}mcp.access") == "mcp:access"
        assert vocabulary.inward("mcp:access") is None  # the policy's own name grants nothing
        assert vocabulary.inward(f"{API}other") is None
        rules = JwtRules.for_issuer(RESOURCE, entra(scope_map_only=True))
        principal = check_jwt_claims(
            claims(scp="mcp.access admin", roles=["Notes.Reader", "Admin"]),
            rules,
            now=time.time(),
            fingerprint="f",
        )
        assert principal.scopes == {"mcp:access", "notes:read"}
        dropped = [d.spelled for d in derive(claims(scp="admin"), rules) if d.scope is None]
        assert dropped == [f"{API}admin"]  # kept in the derivation, for policy explain

    def test_no_map_is_the_identity(self) -> None:
        assert ScopeVocabulary.for_issuer(entra(scope_map=())) is IDENTITY
        assert not IDENTITY
        assert IDENTITY.outward(("a", "b")) == ("a", "b")


class TestJwtDerivation:
    def test_a_delegated_scope_goes_claim_prefix_map(self) -> None:
        rules = JwtRules.for_issuer(RESOURCE, entra())
        found = derive(claims(scp="mcp.access notes.read offline"), rules)
        assert found == (
            DerivedScope("scope", "scp", "mcp.access", f"{API}mcp.access", "mcp:access"),
            DerivedScope("scope", "scp", "notes.read", f"{API}notes.read", "notes:read"),
            DerivedScope("scope", "scp", "offline", f"{API}offline", f"{API}offline"),
        )

    def test_an_app_role_goes_claim_role_prefix_map(self) -> None:
        rules = JwtRules.for_issuer(RESOURCE, entra())
        principal = check_jwt_claims(
            claims(roles=["mcp.access", "Notes.Reader"]), rules, now=time.time(), fingerprint="f"
        )
        assert principal.scopes == {"mcp:access", "notes:read"}
        (role,) = derive(claims(roles=["Notes.Reader"]), rules)
        assert (role.source, role.claim, role.spelled) == ("role", "roles", f"{API}Notes.Reader")

    def test_the_scope_bound_counts_the_spelled_scopes(self) -> None:
        rules = JwtRules.for_issuer(RESOURCE, entra(scope_prefix="", roles=None, scope_map=()))
        check_jwt_claims(
            claims(scp=" ".join(f"s{i}" for i in range(256))),
            rules,
            now=time.time(),
            fingerprint="f",
        )
        with pytest.raises(InvalidToken, match="too many"):
            check_jwt_claims(
                claims(scp=" ".join(f"s{i}" for i in range(257))),
                rules,
                now=time.time(),
                fingerprint="f",
            )


class TestIntrospectedScopes:
    def rules(self) -> ClaimRules:
        keycloak = IssuerConfig(
            url=ISSUER, scope_map=(ScopeMapEntry("mcp", "mcp:access"),), client_id="gw"
        )
        return ClaimRules.for_issuer(RESOURCE, keycloak)

    def test_the_scope_member_is_mapped(self) -> None:
        doc = claims(active=True, aud=RESOURCE, scope="openid mcp profile")
        principal = check_claims(doc, self.rules(), now=time.time(), fingerprint="f")
        assert principal.scopes == {"openid", "mcp:access", "profile"}

    def test_a_scope_that_is_not_a_string_is_still_refused(self) -> None:
        doc = claims(active=True, aud=RESOURCE, scope=["mcp"])
        with pytest.raises(InvalidToken, match="scope is not a string"):
            check_claims(doc, self.rules(), now=time.time(), fingerprint="f")


class TestIntrospectedIdTokens:
    """The JWT path's refusal of ID and refresh tokens, applied to introspection answers that
    carry the token's claims (Keycloak's do)."""

    def check(self, **extra: Any) -> None:
        rules = ClaimRules.for_issuer(RESOURCE, IssuerConfig(url=ISSUER, client_id="gw"))
        doc = claims(active=True, aud=[RESOURCE, "claude-code"], **extra)
        check_claims(doc, rules, now=time.time(), fingerprint="f")

    @pytest.mark.parametrize(
        "extra",
        [
            {"typ": "ID", "nonce": "n", "at_hash": "h"},  # Keycloak's ID token
            {"nonce": "n"},
            {"at_hash": "h"},
            {"c_hash": "h"},
            {"s_hash": "h"},
            {"typ": "ID"},
            {"typ": "Refresh"},
            {"typ": 1},
            {"token_use": "id"},
            {"token_use": "refresh_token"},
        ],
    )
    def test_refused_as_in_the_jwt_path(self, extra: dict[str, Any]) -> None:
        with pytest.raises(InvalidToken) as raised:
            self.check(**extra)
        assert raised.value.detail in {
            "an ID token presented as bearer",
            "typ claim is not Bearer (refresh or ID token)",
            "token_use is not access",
        }

    @pytest.mark.parametrize(
        "extra", [{"typ": "Bearer"}, {"typ": "bearer"}, {"token_use": "access_token"}, {}]
    )
    def test_access_tokens_pass(self, extra: dict[str, Any]) -> None:
        self.check(**extra)  # Keycloak's typ: Bearer; ORY Hydra's token_use: access_token
