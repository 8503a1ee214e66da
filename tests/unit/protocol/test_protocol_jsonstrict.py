"""Strict JSON decoding: UTF-8 only, no duplicate keys, caps tested at the limit and one past."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.config import JsonLimits
from gateway.errors import InvalidRequest, ParseError
from gateway.protocol.jsonstrict import decode

DEFAULTS = JsonLimits()


def nested(depth: int, opener: str = "[", closer: str = "]") -> bytes:
    return (opener * depth + closer * depth).encode()


def nested_objects(depth: int) -> bytes:
    return ('{"a":' * depth + "1" + "}" * depth).encode()


class TestWellFormedBodies:
    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            (
                b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            ),
            (b' \t\r\n{"a":[1,2.5,-3,true,false,null]} \n', {"a": [1, 2.5, -3, True, False, None]}),
            (b'{"a":"\\u00e9\\ud83d\\ude00"}', {"a": "é😀"}),
            ('{"a":"日本"}'.encode(), {"a": "日本"}),
            (b'{"a":"\\u0000"}', {"a": "\x00"}),
            (b"[]", []),
            (b'"text"', "text"),
            (b"1e3", 1000.0),
        ],
        ids=[
            "request",
            "whitespace and scalars",
            "escaped pair",
            "raw UTF-8",
            "escaped NUL",
            "empty array",
            "top-level string",
            "exponent",
        ],
    )
    def test_a_well_formed_body_decodes_to_python_values(self, body: bytes, expected: Any) -> None:
        assert decode(body, DEFAULTS) == expected

    def test_numbers_keep_their_json_kind_so_1_0_is_a_float(self) -> None:
        value = decode(b'{"i":1,"f":1.0,"e":1e3}', DEFAULTS)
        assert type(value["i"]) is int
        assert type(value["f"]) is float
        assert type(value["e"]) is float


@pytest.mark.row("parse_error")
class TestParseErrors:
    @pytest.mark.parametrize(
        "body",
        [
            b"",
            b"   ",
            b"{",
            b'{"a":1,}',
            b"{'a':1}",
            b'{"a":1} {"b":2}',
            b'{"a":1}x',
            b"[1,2]]",
            b'{"a":NaN}',
            b'{"a":Infinity}',
            b'{"a":-Infinity}',
            b'{"a":"\x01"}',
            b'{"a":01}',
            b'{"a":+1}',
            b'{"a":.5}',
            b'{"a":0x10}',
            b"\xef\xbb\xbf{}",
            b'{"a":"\xff"}',
            b'{"a":"\xc3\x28"}',
            b'{"a":"\xc0\xaf"}',
            b'{"a":"\xed\xa0\x80"}',
            b'{"a":"\xe6\x97"}',
            b'{"a":"\\ud800"}',
            b'{"a":"\\udc00x"}',
            b'{"\\ud83d":1}',
            b'["\\ude00\\ud83d"]',
            b'{"a":1,"a":2}',
            b'{"a":1,"\\u0061":2}',
            b'{"x":{"id":1,"i\\u0064":2}}',
            b'[{"k":1,"k":1}]',
        ],
        ids=[
            "empty",
            "whitespace only",
            "truncated",
            "trailing comma",
            "single quotes",
            "two values",
            "trailing garbage",
            "extra bracket",
            "NaN",
            "Infinity",
            "-Infinity",
            "control char in string",
            "leading zero",
            "plus sign",
            "bare fraction",
            "hex",
            "UTF-8 BOM",
            "invalid byte",
            "bad continuation",
            "overlong slash",
            "encoded surrogate",
            "truncated sequence",
            "lone high surrogate escape",
            "lone low surrogate escape",
            "lone surrogate in key",
            "reversed pair",
            "duplicate key",
            "escaped duplicate key",
            "nested escaped duplicate",
            "duplicate in array member",
        ],
    )
    def test_a_malformed_body_is_a_parse_error(self, body: bytes) -> None:
        with pytest.raises(ParseError) as caught:
            decode(body, DEFAULTS)
        assert caught.value.status_for() == 400
        assert caught.value.jsonrpc_code == -32700
        assert caught.value.request_id is None

    def test_the_error_never_echoes_the_input(self) -> None:
        with pytest.raises(ParseError) as caught:
            decode(b'{"secret-token-abc":1,"secret-token-abc":2}', DEFAULTS)
        assert "secret" not in str(caught.value)
        assert "secret" not in caught.value.detail


@pytest.mark.row("invalid_request")
class TestCaps:
    """Each cap is accepted at the limit and refused one past it, as -32600."""

    @pytest.mark.parametrize("shape", ["arrays", "objects"])
    def test_nesting_depth_is_capped(self, shape: str) -> None:
        limits = JsonLimits(max_depth=8)
        build = nested if shape == "arrays" else nested_objects
        assert decode(build(8), limits) is not None
        with pytest.raises(InvalidRequest) as caught:
            decode(build(9), limits)
        assert caught.value.jsonrpc_code == -32600
        assert caught.value.status_for() == 400

    def test_the_default_depth_cap_is_32(self) -> None:
        decode(nested(32), DEFAULTS)
        with pytest.raises(InvalidRequest):
            decode(nested(33), DEFAULTS)

    @pytest.mark.parametrize("depth", [1_000, 100_000])
    def test_a_depth_bomb_is_refused_without_recursion_error(self, depth: int) -> None:
        with pytest.raises(InvalidRequest):
            decode(b"[" * depth, DEFAULTS)
        with pytest.raises(InvalidRequest):
            decode(nested(depth), DEFAULTS)
        with pytest.raises(InvalidRequest):
            decode(b'{"a":' * depth, DEFAULTS)

    def test_brackets_inside_strings_do_not_count_as_depth(self) -> None:
        body = json.dumps({"a": "[" * 500 + "{" * 500}).encode()
        assert decode(body, JsonLimits(max_depth=2))["a"].startswith("[[")

    def test_members_per_object_are_capped(self) -> None:
        limits = JsonLimits(max_members=4)
        at = json.dumps({str(i): i for i in range(4)}).encode()
        past = json.dumps({str(i): i for i in range(5)}).encode()
        assert len(decode(at, limits)) == 4
        with pytest.raises(InvalidRequest):
            decode(past, limits)

    def test_array_length_is_capped(self) -> None:
        limits = JsonLimits(max_array_length=5)
        assert decode(json.dumps({"a": list(range(5))}).encode(), limits) == {"a": [0, 1, 2, 3, 4]}
        with pytest.raises(InvalidRequest):
            decode(json.dumps({"a": list(range(6))}).encode(), limits)

    def test_commas_inside_strings_do_not_trip_the_array_cap(self) -> None:
        body = json.dumps({"a": ["x," * 50]}).encode()
        assert decode(body, JsonLimits(max_array_length=2))["a"] == ["x," * 50]

    @pytest.mark.parametrize(
        ("at_limit", "past_limit"),
        [
            ("a" * 16, "a" * 17),
            ("é" * 8, "é" * 8 + "a"),
            ("😀" * 4, "😀" * 4 + "a"),
        ],
        ids=["ASCII", "2-byte UTF-8", "4-byte UTF-8"],
    )
    def test_string_size_is_capped_in_utf8_bytes(self, at_limit: str, past_limit: str) -> None:
        limits = JsonLimits(max_string_bytes=16)
        for body in (json.dumps({"v": at_limit}), json.dumps([at_limit]), json.dumps(at_limit)):
            assert decode(body.encode(), limits)
        for body in (json.dumps({"v": past_limit}), json.dumps([past_limit])):
            with pytest.raises(InvalidRequest):
                decode(body.encode(), limits)

    def test_escaped_strings_are_measured_after_unescaping(self) -> None:
        limits = JsonLimits(max_string_bytes=16)
        escaped = ("\\u0061" * 16).encode()
        assert decode(b'{"v":"' + escaped + b'"}', limits) == {"v": "a" * 16}
        with pytest.raises(InvalidRequest):
            decode(b'{"v":"' + escaped + b'\\u0061"}', limits)

    def test_object_keys_count_against_the_string_cap(self) -> None:
        limits = JsonLimits(max_string_bytes=16)
        assert decode(json.dumps({"k" * 16: 1}).encode(), limits)
        with pytest.raises(InvalidRequest):
            decode(json.dumps({"k" * 17: 1}).encode(), limits)

    @pytest.mark.parametrize(
        ("at_limit", "past_limit"),
        [
            ("1" * 8, "1" * 9),
            ("-" + "1" * 7, "-" + "1" * 8),
            ("1.234567", "1.2345678"),
            ("1e+12345", "1e+123456"),
        ],
        ids=["integer", "negative integer", "fraction", "exponent"],
    )
    def test_number_tokens_are_capped_in_characters(self, at_limit: str, past_limit: str) -> None:
        limits = JsonLimits(max_number_chars=8)
        if "e" in at_limit:
            # 1e+12345 is beyond the double range: within the token cap but still refused.
            with pytest.raises(InvalidRequest):
                decode(f'{{"n":{at_limit}}}'.encode(), limits)
        else:
            assert decode(f'{{"n":{at_limit}}}'.encode(), limits) == {"n": json.loads(at_limit)}
        with pytest.raises(InvalidRequest):
            decode(f'{{"n":{past_limit}}}'.encode(), limits)

    def test_a_4300_digit_integer_is_refused_as_a_cap_not_a_crash(self) -> None:
        with pytest.raises(InvalidRequest):
            decode(b'{"n":' + b"9" * 5000 + b"}", DEFAULTS)

    def test_a_number_beyond_the_double_range_is_refused(self) -> None:
        with pytest.raises(InvalidRequest):
            decode(b'{"n":1e400}', DEFAULTS)
        assert decode(b'{"n":1e300}', DEFAULTS) == {"n": 1e300}
