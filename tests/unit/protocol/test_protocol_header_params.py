"""`Mcp-Param-*` validation for tools with `x-mcp-header` arguments (tools.mdx)."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import CIMultiDict

from gateway.errors import GatewayError, HeaderMismatch
from gateway.protocol.classify import classify
from gateway.protocol.headers import decode_mirrored, param_matches
from gateway.protocol.messages import McpMessage
from gateway.seams import HeaderParam
from tests.support.protocol import lookup, modern_body, modern_headers, tool

SEARCH = tool(
    "search",
    HeaderParam(header="Region", path=("region",), type="string"),
    HeaderParam(header="Limit", path=("options", "limit"), type="integer"),
    HeaderParam(header="Exact", path=("exact",), type="boolean"),
)
TOOLS = lookup([SEARCH, tool("plain")])


def call(arguments: Any, **params: str) -> McpMessage | tuple[McpMessage, ...]:
    hdrs = modern_headers("tools/call", "search", **params)
    return classify(hdrs, modern_body("tools/call", name="search", arguments=arguments), TOOLS)


class TestAccepted:
    def test_matching_headers_are_admitted_and_forwarded_raw(self) -> None:
        message = call(
            {"region": "eu-west", "options": {"limit": 25}, "exact": True},
            Region=" eu-west ",
            Limit="25",
            Exact="true",
        )
        assert isinstance(message, McpMessage)
        assert dict(message.header_params) == {"Region": "eu-west", "Limit": "25", "Exact": "true"}

    def test_a_wrapped_value_is_decoded_for_comparison_and_forwarded_wrapped(self) -> None:
        message = call({"region": "Zürich"}, Region="=?base64?WsO8cmljaA==?=")
        assert isinstance(message, McpMessage)
        assert message.header_params == {"Region": "=?base64?WsO8cmljaA==?="}

    @pytest.mark.parametrize("arguments", [{}, {"region": None}, {"options": {"limit": None}}])
    def test_absent_or_null_body_values_need_no_header(self, arguments: Any) -> None:
        message = call(arguments)
        assert isinstance(message, McpMessage)
        assert message.header_params == {}

    def test_integers_compare_numerically(self) -> None:
        assert isinstance(call({"options": {"limit": 42.0}}, Limit="42"), McpMessage)
        assert isinstance(call({"options": {"limit": 42}}, Limit="42.0"), McpMessage)

    def test_header_names_are_case_insensitive(self) -> None:
        hdrs = modern_headers("tools/call", "search")
        hdrs.add("mcp-param-region", "eu")
        body = modern_body("tools/call", name="search", arguments={"region": "eu"})
        assert isinstance(classify(hdrs, body, TOOLS), McpMessage)

    def test_tools_without_declared_headers_ignore_mcp_param_headers(self) -> None:
        hdrs = modern_headers("tools/call", "plain", Region="anything")
        message = classify(hdrs, modern_body("tools/call", name="plain"), TOOLS)
        assert isinstance(message, McpMessage)
        assert message.header_params == {}

    def test_undeclared_mcp_param_headers_are_not_forwarded(self) -> None:
        message = call({"region": "eu"}, Region="eu", Other="x")
        assert isinstance(message, McpMessage)
        assert message.header_params == {"Region": "eu"}


@pytest.mark.row("header_mismatch")
class TestRefused:
    @pytest.mark.parametrize(
        ("arguments", "params"),
        [
            ({"region": "eu"}, {}),
            ({"region": "eu"}, {"Region": "us"}),
            ({"region": "eu"}, {"Region": "EU"}),
            ({}, {"Region": "eu"}),
            ({"region": None}, {"Region": "null"}),
            ({"options": {"limit": 25}}, {"Limit": "26"}),
            ({"options": {"limit": 25}}, {"Limit": "25x"}),
            ({"options": {"limit": 25}}, {"Limit": "0x19"}),
            ({"options": {"limit": 25.5}}, {"Limit": "25.5"}),
            ({"options": {"limit": "25"}}, {"Limit": "25"}),
            ({"options": {"limit": True}}, {"Limit": "1"}),
            ({"exact": True}, {"Exact": "True"}),
            ({"exact": False}, {"Exact": "0"}),
            ({"exact": "true"}, {"Exact": "true"}),
            ({"region": 5}, {"Region": "5"}),
            ({"region": "eu"}, {"Region": "=?base64?ZXU?="}),
            ({"region": "eu\n"}, {"Region": "eu\n"}),
            ("not-an-object", {"Region": "eu"}),
        ],
        ids=[
            "header missing",
            "different value",
            "different case",
            "header without body value",
            "header for a null value",
            "different integer",
            "integer with junk",
            "hex integer",
            "fractional body",
            "string body for integer",
            "bool body for integer",
            "capitalised boolean",
            "numeric boolean",
            "string body for boolean",
            "number body for string",
            "unpadded base64",
            "control character",
            "arguments not an object",
        ],
    )
    def test_a_missing_extra_or_different_param_header_is_a_mismatch(
        self, arguments: Any, params: dict[str, str]
    ) -> None:
        with pytest.raises(GatewayError) as caught:
            call(arguments, **params)
        assert type(caught.value) is HeaderMismatch
        assert (caught.value.request_id, caught.value.era) == (1, "modern")
        assert caught.value.status_for() == 400
        assert caught.value.jsonrpc_code == -32020

    def test_a_duplicated_param_header_is_a_mismatch(self) -> None:
        hdrs: CIMultiDict[str] = modern_headers("tools/call", "search", Region="eu")
        hdrs.add("Mcp-Param-Region", "eu")
        body = modern_body("tools/call", name="search", arguments={"region": "eu"})
        with pytest.raises(HeaderMismatch):
            classify(hdrs, body, TOOLS)


class TestValueDecoding:
    @pytest.mark.parametrize(
        ("raw", "decoded"),
        [
            ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
            ("=?base64?IHBhZGRlZCA=?=", " padded "),
            ("=?base64??=", ""),
            ("plain", "plain"),
            ("  plain \t", "plain"),
            ("=?base64?", "=?base64?"),
        ],
        ids=[
            "non-ASCII",
            "padded payload kept",
            "empty payload",
            "plain",
            "plain trimmed",
            "prefix alone is plain",
        ],
    )
    def test_valid_values_decode(self, raw: str, decoded: str) -> None:
        assert decode_mirrored(raw) == decoded

    @pytest.mark.parametrize(
        "raw",
        [
            "=?base64?SGVsbG8sIOS4lueVjA=?=",
            "=?base64?SGVsbG8sIOS4lueVjA?=",
            "=?base64?SGVsbG8sIOS4lueVjB==?=",
            "=?base64?SGVs bG8=?=",
            "=?base64?SGVsbG8_?=",
            "=?base64?/w==?=",
            "=?base64?7aCA?=",
            "caf\u00e9",
            "a\x00b",
            "a\x7fb",
        ],
        ids=[
            "short padding",
            "no padding",
            "non-zero pad bits",
            "inner space",
            "url alphabet",
            "invalid UTF-8",
            "encoded surrogate",
            "non-ASCII plain",
            "NUL",
            "DEL",
        ],
    )
    def test_invalid_values_decode_to_none(self, raw: str) -> None:
        assert decode_mirrored(raw) is None

    def test_an_unknown_parameter_type_never_matches(self) -> None:
        assert not param_matches("number", "1", 1)
