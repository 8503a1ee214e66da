"""The one strict JSON reader (gateway/jsonkit.py): what it refuses, its caps at the limit and one
past, the media types of a peer's answer, and properties over generated values and bytes.

The client-body rules (their mapping to ParseError/InvalidRequest) are tested through
``protocol/jsonstrict.py`` in tests/unit/protocol/; the peers' answers through real HTTP in
tests/integration/ (decision point, token endpoints, issuer metadata, JWK Sets, backends)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.jsonkit.read import (
    PEER,
    UNBOUNDED,
    JsonError,
    JsonLimits,
    answer,
    is_json,
    loads,
    loads_object,
    media_type,
    peer_limits,
)

PROPERTY = settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


REASONS = {
    "byte order mark",
    "invalid UTF-8",
    "malformed JSON",
    "duplicate object key",
    "non-finite number literal",
    "number out of range",
    "lone surrogate escape",
    "nesting depth over limit",
}


def nested_objects(depth: int) -> bytes:
    return ('{"n":' * (depth - 1) + "{}" + "}" * (depth - 1)).encode()


class TestRefusals:
    @pytest.mark.parametrize(
        ("body", "kind"),
        [
            (b'{"decision": false, "decision": true}', "syntax"),
            (b'{"a": 1, "\\u0061": 2}', "syntax"),
            (b'{"a": NaN}', "syntax"),
            (b'{"a": Infinity}', "syntax"),
            (b'{"a": -Infinity}', "syntax"),
            (b'{"a": 1e400}', "limit"),
            (b'{"a": -1e400}', "limit"),
            (b'\xef\xbb\xbf{"a": 1}', "syntax"),
            ('{"a": 1}'.encode("utf-16"), "syntax"),
            ('{"a": 1}'.encode("utf-32"), "syntax"),
            (b'{"a": "\xc0\xaf"}', "syntax"),
            (b'{"a": "\xed\xa0\x80"}', "syntax"),
            (b'{"a": "\\ud800"}', "syntax"),
            (b'{"a": "\\udc00x"}', "syntax"),
            (b'{"a": 1} x', "syntax"),
            (b'{"a": "\x01"}', "syntax"),
            (b"", "syntax"),
            (b"[" * 5000 + b"]" * 5000, "limit"),
        ],
        ids=[
            "duplicate member",
            "escaped duplicate",
            "NaN",
            "Infinity",
            "-Infinity",
            "overflow",
            "negative overflow",
            "byte order mark",
            "UTF-16",
            "UTF-32",
            "overlong UTF-8",
            "encoded surrogate",
            "lone high surrogate",
            "lone low surrogate",
            "trailing data",
            "control character",
            "empty",
            "5000 nested arrays",
        ],
    )
    def test_what_a_lenient_reader_takes_is_refused_with_a_fixed_reason(
        self, body: bytes, kind: str
    ) -> None:
        with pytest.raises(JsonError) as info:
            loads(body, peer_limits(UNBOUNDED))
        assert info.value.kind == kind
        assert str(info.value) == info.value.reason in REASONS  # fixed text, no input echoed

    def test_an_escaped_surrogate_pair_is_one_character(self) -> None:
        assert loads(b'{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}

    def test_text_is_read_like_bytes(self) -> None:
        assert loads('{"a": [1, 2.5, "é"]}') == {"a": [1, 2.5, "é"]}
        with pytest.raises(JsonError):
            loads('\ufeff{"a": 1}')

    def test_loads_object_refuses_other_values(self) -> None:
        for body in (b"[]", b'"x"', b"1", b"null"):
            with pytest.raises(JsonError, match="not a JSON object"):
                loads_object(body)


class TestCaps:
    def test_depth_at_the_limit_is_read_and_one_deeper_refused(self) -> None:
        limits = peer_limits(8)
        assert loads(nested_objects(8), limits)
        with pytest.raises(JsonError, match="nesting depth") as info:
            loads(nested_objects(9), limits)
        assert info.value.kind == "limit"

    def test_the_peer_default_depth_is_16(self) -> None:
        assert PEER.max_depth == 16
        assert loads(nested_objects(16))
        with pytest.raises(JsonError):
            loads(nested_objects(17))

    def test_max_bytes_at_the_limit_is_read_and_one_past_refused(self) -> None:
        body = b'{"a":"' + b"x" * 10 + b'"}'
        assert loads(body, max_bytes=len(body)) == {"a": "x" * 10}
        with pytest.raises(JsonError, match="size") as info:
            loads(body, max_bytes=len(body) - 1)
        assert info.value.kind == "limit"
        with pytest.raises(JsonError, match="size"):
            loads(body.decode(), max_bytes=len(body) - 1)

    @pytest.mark.parametrize(
        ("field", "at_limit", "past_limit"),
        [
            ("max_members", b'{"a":1,"b":2}', b'{"a":1,"b":2,"c":3}'),
            ("max_array_length", b"[1,2]", b"[1,2,3]"),
            ("max_string_bytes", '"éé"'.encode(), '"ééé"'.encode()),  # 2 bytes each
            ("max_number_chars", b"[1.25]", b"[1.125]"),
        ],
    )
    def test_each_cap_at_the_limit_and_one_past(
        self, field: str, at_limit: bytes, past_limit: bytes
    ) -> None:
        value = {
            "max_members": 2,
            "max_array_length": 2,
            "max_string_bytes": 4,
            "max_number_chars": 4,
        }[field]
        limits = JsonLimits(**{field: value})  # type: ignore[arg-type]
        assert loads(at_limit, limits) is not None
        with pytest.raises(JsonError) as info:
            loads(past_limit, limits)
        assert info.value.kind == "limit"

    def test_unbounded_caps_read_what_the_client_caps_refuse(self) -> None:
        wide = json.dumps({"k": list(range(5000)), **{f"m{i}": i for i in range(300)}}).encode()
        with pytest.raises(JsonError):
            loads(wide, JsonLimits())
        assert len(loads(wide, PEER)["k"]) == 5000


class TestAnswer:
    @pytest.mark.parametrize(
        "content_type",
        [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/jwk-set+json",
            "application/problem+json",
        ],
    )
    def test_json_media_types_are_read(self, content_type: str) -> None:
        assert is_json(content_type)
        assert answer(content_type, b'{"decision": true}') == {"decision": True}

    @pytest.mark.parametrize(
        "content_type",
        [
            "",
            "text/plain",
            "text/json",
            "text/html",
            "application/x-json+xml",
            "application/jsonp",
            "+json",
        ],
    )
    def test_other_media_types_are_refused_before_the_body_is_read(self, content_type: str) -> None:
        assert not is_json(content_type)
        with pytest.raises(JsonError) as info:
            answer(content_type, b'{"decision": true}')
        assert info.value.kind == "content_type"

    def test_an_answer_must_be_one_object(self) -> None:
        with pytest.raises(JsonError, match="object"):
            answer("application/json", b"[true]")

    def test_media_type_drops_parameters_and_case(self) -> None:
        assert media_type(" Application/Problem+JSON ; charset=UTF-8") == "application/problem+json"


# --- properties -------------------------------------------------------------------------------

# JSON values as the reader returns them: no lone surrogates, finite floats.
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_TEXT, inner, max_size=5),
    max_leaves=30,
)


@PROPERTY
@given(_VALUES, st.booleans())
def test_every_value_written_as_json_is_read_back(value: Any, ascii_only: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    assert loads(body, peer_limits(UNBOUNDED)) == value


@PROPERTY
@given(st.binary(max_size=200))
def test_arbitrary_bytes_are_read_or_refused_with_a_json_error(body: bytes) -> None:
    try:
        loads(
            body,
            JsonLimits(
                max_depth=4,
                max_members=4,
                max_array_length=4,
                max_string_bytes=16,
                max_number_chars=8,
            ),
        )
    except JsonError as exc:
        assert exc.kind in ("syntax", "limit")


@PROPERTY
@given(st.dictionaries(_TEXT, _SCALARS, min_size=1, max_size=5), st.data())
def test_a_repeated_member_is_refused_whatever_its_value(
    doc: dict[str, Any], data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(sorted(doc)))
    text = json.dumps(doc)
    repeated = text[:-1] + ", " + json.dumps(name) + ": " + json.dumps(doc[name]) + "}"
    with pytest.raises(JsonError, match="duplicate"):
        loads(repeated.encode())


@PROPERTY
@given(_VALUES)
def test_the_client_caps_refuse_no_value_the_unbounded_reader_takes_within_them(
    value: Any,
) -> None:
    """Skipping the walk when a whole-text count proves a cap cannot fire changes nothing:
    a value within every cap is read the same with and without the shortcut's conditions."""
    body = json.dumps(value).encode()
    try:
        capped = loads(body, JsonLimits())
    except JsonError as exc:
        assert exc.kind == "limit"
    else:
        assert capped == loads(body, peer_limits(UNBOUNDED))
