"""RFC 6750 §3 challenges: one builder, quoted values, RFC 6749 character sets enforced."""

from __future__ import annotations

import pytest

from gateway.auth.challenge import bearer_challenge, challenge_for, valid_scopes
from gateway.errors import (
    InsufficientScope,
    InvalidToken,
    IssuerUnavailable,
    NoCredentials,
    RateLimited,
    TokenInQuery,
    ToolInsufficientScope,
)

PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


class TestBuilder:
    def test_values_are_quoted_and_joined_in_order(self) -> None:
        assert (
            bearer_challenge([("error", "invalid_token"), ("scope", "a b")])
            == 'Bearer error="invalid_token", scope="a b"'
        )

    @pytest.mark.parametrize(
        ("name", "value"),
        [
            ("error", 'x"y'),
            ("error", "x\\y"),
            ("scope", "a  b"),
            ("scope", ""),
            ("scope", "a\tb"),
            ("resource_metadata", "https://x/ y"),
            ("error_description", "caf\u00e9"),
            ("error", "line\r\nInjected: 1"),
        ],
        ids=[
            "quote",
            "backslash",
            "double space in scope",
            "empty scope",
            "tab in scope",
            "space in URI",
            "non-ASCII description",
            "CRLF",
        ],
    )
    def test_characters_outside_rfc_6749_sets_are_refused(self, name: str, value: str) -> None:
        with pytest.raises(ValueError, match="RFC 6749"):
            bearer_challenge([(name, value)])

    def test_unknown_and_repeated_parameters_are_refused(self) -> None:
        with pytest.raises(ValueError, match="unknown"):
            bearer_challenge([("foo", "bar")])
        with pytest.raises(ValueError, match="once"):
            bearer_challenge([("scope", "a"), ("scope", "b")])

    def test_valid_scopes_drops_unsafe_tokens_and_duplicates(self) -> None:
        assert valid_scopes(["a", 'b"', "a", "c d", "", "e"]) == ("a", "e")


class TestRows:
    def test_no_credentials_has_no_error_code_but_metadata_and_baseline_scope(self) -> None:
        value = challenge_for(NoCredentials(), resource_metadata=PRM, baseline=("mcp:access",))
        assert value == f'Bearer resource_metadata="{PRM}", scope="mcp:access"'

    def test_no_credentials_without_a_baseline_omits_scope(self) -> None:
        value = challenge_for(NoCredentials(), resource_metadata=PRM, baseline=())
        assert value == f'Bearer resource_metadata="{PRM}"'

    def test_invalid_token_carries_the_error_code(self) -> None:
        value = challenge_for(InvalidToken(), resource_metadata=PRM, baseline=("mcp:access",))
        assert value == (
            'Bearer error="invalid_token", error_description="Invalid or expired access token", '
            f'resource_metadata="{PRM}", scope="mcp:access"'
        )

    @pytest.mark.parametrize("cls", [InsufficientScope, ToolInsufficientScope])
    def test_insufficient_scope_names_every_needed_scope(
        self, cls: type[InsufficientScope]
    ) -> None:
        value = challenge_for(
            cls(scopes=("mcp:access", "tickets:write")), resource_metadata=PRM, baseline=("x",)
        )
        assert value == (
            'Bearer error="insufficient_scope", error_description="Insufficient scope", '
            f'scope="mcp:access tickets:write", resource_metadata="{PRM}"'
        )

    def test_token_in_query_is_invalid_request(self) -> None:
        value = challenge_for(TokenInQuery(), resource_metadata=PRM, baseline=("x",))
        assert value is not None
        assert value.startswith('Bearer error="invalid_request", ')

    def test_issuer_unavailable_has_no_error_code(self) -> None:
        value = challenge_for(IssuerUnavailable(), resource_metadata=PRM, baseline=("x",))
        assert value == f'Bearer resource_metadata="{PRM}"'

    def test_rows_without_a_challenge_get_none(self) -> None:
        assert challenge_for(RateLimited(), resource_metadata=PRM, baseline=()) is None
