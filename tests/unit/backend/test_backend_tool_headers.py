"""x-mcp-header rules (2026-07-28 tools.mdx §x-mcp-header) and header value encoding."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.backend.upstream.tool_headers import (
    encode_header_value,
    header_params,
    param_header_value,
    param_values,
)
from gateway.seams import HeaderParam


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


class TestHeaderParams:
    def test_annotations_along_properties_chains_are_found_with_their_paths(self) -> None:
        schema = obj(
            region={"type": "string", "x-mcp-header": "Region"},
            opts=obj(dry={"type": "boolean", "x-mcp-header": "Dry-Run"}),
            n={"type": "integer", "x-mcp-header": "N"},
        )
        assert header_params(schema) == (
            HeaderParam("Region", ("region",), "string"),
            HeaderParam("Dry-Run", ("opts", "dry"), "boolean"),
            HeaderParam("N", ("n",), "integer"),
        )

    def test_a_nullable_string_property_may_carry_an_annotation(self) -> None:
        schema = obj(a={"type": ["string", "null"], "x-mcp-header": "A"})
        assert header_params(schema) == (HeaderParam("A", ("a",), "string"),)

    def test_a_schema_without_annotations_has_no_header_params(self) -> None:
        assert header_params(obj(a={"type": "string"})) == ()

    @pytest.mark.parametrize(
        "schema",
        [
            pytest.param(obj(a={"type": "string", "x-mcp-header": ""}), id="empty name"),
            pytest.param(obj(a={"type": "string", "x-mcp-header": 7}), id="non-string name"),
            pytest.param(obj(a={"type": "string", "x-mcp-header": "a b"}), id="space"),
            pytest.param(obj(a={"type": "string", "x-mcp-header": "a\r\nX: y"}), id="CRLF"),
            pytest.param(obj(a={"type": "string", "x-mcp-header": "a\x01"}), id="control"),
            pytest.param(obj(a={"type": "string", "x-mcp-header": "Ä"}), id="non-ASCII"),
            pytest.param(
                obj(
                    a={"type": "string", "x-mcp-header": "Same"},
                    b={"type": "string", "x-mcp-header": "same"},
                ),
                id="case-insensitive duplicate",
            ),
            pytest.param(obj(a={"type": "number", "x-mcp-header": "A"}), id="number"),
            pytest.param(obj(a={"type": "object", "x-mcp-header": "A"}), id="object"),
            pytest.param(obj(a={"x-mcp-header": "A"}), id="untyped"),
            pytest.param(
                obj(a={"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}),
                id="inside items",
            ),
            pytest.param(
                {"type": "object", "oneOf": [obj(a={"type": "string", "x-mcp-header": "A"})]},
                id="inside oneOf",
            ),
            pytest.param(
                {
                    "type": "object",
                    "$defs": {"x": {"type": "string", "x-mcp-header": "A"}},
                    "properties": {"a": {"$ref": "#/$defs/x"}},
                },
                id="behind $ref",
            ),
            pytest.param(
                obj(a=obj(b={"type": "string"}) | {"anyOf": [{"x-mcp-header": "A"}]}),
                id="combinator under a property",
            ),
            pytest.param({"type": "object", "x-mcp-header": "Root"}, id="on the root"),
        ],
    )
    def test_an_invalid_annotation_is_refused(self, schema: dict[str, Any]) -> None:
        with pytest.raises(ValueError, match=r"x-mcp-header|nest"):
            header_params(schema)

    def test_a_property_merely_named_like_the_annotation_is_not_one(self) -> None:
        schema = obj(**{"x-mcp-header": {"type": "string"}})
        assert header_params(schema) == ()


class TestEncoding:
    @pytest.mark.parametrize(
        ("value", "wire"),
        [
            ("get_weather", "get_weather"),
            ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
            (" padded ", "=?base64?IHBhZGRlZCA=?="),
            ("=?base64?abc?=", "=?base64?PT9iYXNlNjQ/YWJjPz0=?="),
            ("a\r\nb", "=?base64?YQ0KYg==?="),
        ],
    )
    def test_values_are_sent_plain_or_base64_wrapped_per_the_spec(
        self, value: str, wire: str
    ) -> None:
        assert encode_header_value(value) == wire

    def test_argument_values_convert_by_declared_type(self) -> None:
        assert param_header_value(True, "boolean") == "true"
        assert param_header_value(False, "boolean") == "false"
        assert param_header_value(42, "integer") == "42"
        assert param_header_value(42.0, "integer") == "42"
        assert param_header_value(True, "integer") is None
        assert param_header_value(None, "string") is None
        assert param_header_value("x y", "string") == "x y"

    def test_param_headers_come_from_the_arguments_and_skip_null_or_absent_values(self) -> None:
        params = (
            HeaderParam("Region", ("region",), "string"),
            HeaderParam("Dry", ("opts", "dry"), "boolean"),
            HeaderParam("Missing", ("nope",), "string"),
        )
        got = param_values(params, {"region": "eu", "opts": {"dry": False}, "nope": None})
        assert got == {"Mcp-Param-Region": "eu", "Mcp-Param-Dry": "false"}
