"""RFC 6750 §2.1 bearer extraction: header only, one header, token68, 8 KiB."""

from __future__ import annotations

import pytest

from gateway.auth.bearer import MAX_TOKEN_BYTES, extract_bearer
from gateway.errors import InvalidToken, NoCredentials, TokenInQuery
from gateway.seams import AuthRequest


def req(*authorization: str, query: frozenset[str] = frozenset()) -> AuthRequest:
    return AuthRequest(authorization=authorization, query_keys=query, client_ip="192.0.2.1")


class TestAccepted:
    @pytest.mark.parametrize(
        "header",
        [
            "Bearer abc.DEF-_~+/==",
            "bearer abc.DEF-_~+/==",
            "BEARER abc.DEF-_~+/==",
            "Bearer   abc.DEF-_~+/==",
            " Bearer abc.DEF-_~+/== ",
        ],
        ids=["Bearer <t>", "bearer <t>", "BEARER <t>", "Bearer<3 spaces><t>", "padded"],
    )
    def test_the_bearer_scheme_is_case_insensitive_and_the_token_is_returned(
        self, header: str
    ) -> None:
        assert extract_bearer(req(header)) == "abc.DEF-_~+/=="

    def test_a_token_of_exactly_8_kib_is_accepted(self) -> None:
        assert len(extract_bearer(req("Bearer " + "a" * MAX_TOKEN_BYTES))) == MAX_TOKEN_BYTES


class TestRefused:
    def test_a_token_one_byte_over_8_kib_is_invalid_token(self) -> None:
        with pytest.raises(InvalidToken):
            extract_bearer(req("Bearer " + "a" * (MAX_TOKEN_BYTES + 1)))

    def test_access_token_in_the_query_is_invalid_request_even_with_a_header(self) -> None:
        with pytest.raises(TokenInQuery):
            extract_bearer(req("Bearer abc", query=frozenset({"access_token"})))

    def test_two_authorization_headers_are_invalid_request(self) -> None:
        with pytest.raises(TokenInQuery):
            extract_bearer(req("Bearer abc", "Bearer def"))

    @pytest.mark.parametrize(
        "headers",
        [(), ("",), ("Basic dXNlcjpwYXNz",), ("Bearerabc",), ("Token abc",)],
        ids=["no header", "empty header", "Basic <creds>", "Bearer<no space><t>", "Token <t>"],
    )
    def test_no_bearer_credentials_are_no_credentials(self, headers: tuple[str, ...]) -> None:
        with pytest.raises(NoCredentials):
            extract_bearer(req(*headers))

    @pytest.mark.parametrize(
        "header",
        [
            "Bearer",
            "Bearer ",
            "Bearer a b",
            "Bearer a=b",
            "Bearer é",
            'Bearer "abc"',
            "Bearer abc,",
            "Bearer =abc",
        ],
        ids=[
            "Bearer",
            "Bearer<space>",
            "two tokens",
            "= inside",
            "non-ASCII",
            "quoted",
            "trailing comma",
            "leading =",
        ],
    )
    def test_a_malformed_bearer_token_is_invalid_token(self, header: str) -> None:
        with pytest.raises(InvalidToken):
            extract_bearer(req(header))
