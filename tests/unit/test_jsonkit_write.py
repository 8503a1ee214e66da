"""gateway.jsonkit.write: compact, orjson's speed, the standard encoder's results.

The reference is ``json.dumps(ensure_ascii=False, allow_nan=False, separators=(",", ":"))``
(``sort_keys`` for canonical forwarding). For any value, ``compact`` must produce the same JSON
text (byte for byte when no float is involved, the same values otherwise) or raise the same
kind of error.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.jsonkit.read import JsonError
from gateway.jsonkit.write import canonical, compact, plain_copy

PROPERTY = settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and infinities included: the reference refuses them
    | st.text(max_size=12)  # lone surrogates included
    | st.sampled_from(["null", "a\u2028b", "\x00\x1f\x7f", '"\\', "日本語", "\ud800"])
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=24,
)


def reference(value: Any, sort_keys: bool) -> bytes:
    return json.dumps(
        value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=sort_keys
    ).encode("utf-8")


def has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, dict):
        return any(has_float(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(has_float(v) for v in value)
    return False


def outcome(encode: Any) -> tuple[str, Any]:
    try:
        return "ok", encode()
    except (TypeError, ValueError, RecursionError) as exc:
        kind = "unicode" if isinstance(exc, UnicodeEncodeError) else type(exc).__name__
        return "error", kind


@PROPERTY
@given(values, st.booleans())
def test_the_same_text_or_the_same_error_as_the_reference(value: Any, sort_keys: bool) -> None:
    want = outcome(lambda: reference(value, sort_keys))
    got = outcome(lambda: compact(value, sort_keys=sort_keys))
    if want[0] == "error":
        assert got == want
        return
    assert got[0] == "ok"
    if has_float(value):  # the same values in the same order; exponents may differ
        decoded = json.loads(got[1])
        assert decoded == json.loads(want[1])
        assert json.dumps(decoded) == json.dumps(json.loads(want[1]))
    else:
        assert got[1] == want[1]


class Colour(enum.IntEnum):
    RED = 1


@dataclasses.dataclass
class Point:
    x: int


class Text(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"x": math.nan},
        {"x": [1, math.inf]},
        {"x": -math.inf, "y": None},
        {"id": None, "pad": "x" * 3000, "deep": [[{"x": math.nan}]]},
        {"id": None, "pad": "x" * 3000},
        {"id": None, "deep": [[{"x": (1.5, math.inf)}]]},
        {"big": 2**64, "neg": -(2**63) - 1},
        {1: "int key"},
        {"e": Colour.RED, "s": Text("sub"), "d": {"k": [Text("t")]}},
        {"p": Point(1)},
        {"t": datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)},
        {"s": "lone \udc80 surrogate"},
        {"set": {1, 2}},
        {"tuple": (1, "a")},
        {"b": "ü", "a": "\x00", "c": "null"},
    ],
    ids=[
        "nan",
        "inf",
        "-inf",
        "long with null and nan",
        "long with null",
        "nested inf",
        "beyond 64 bits",
        "int key",
        "subclasses",
        "dataclass",
        "datetime",
        "lone surrogate",
        "set",
        "tuple",
        "sorting and escapes",
    ],
)
@pytest.mark.parametrize("sort_keys", [False, True], ids=["plain", "sorted"])
def test_where_orjson_differs_the_reference_decides(value: Any, sort_keys: bool) -> None:
    assert outcome(lambda: compact(value, sort_keys=sort_keys)) == outcome(
        lambda: reference(value, sort_keys)
    )


def test_deep_nesting_is_refused_like_the_reference() -> None:
    value: Any = []
    for _ in range(100_000):
        value = [value]
    assert outcome(lambda: compact(value))[0] == "error"


# --- canonical and plain_copy ------------------------------------------------------------------


@PROPERTY
@given(values)
def test_canonical_is_the_sorted_reference_always(value: Any) -> None:
    """Never orjson's spelling: the pinned catalog's hashes are of these bytes."""
    try:
        expected = reference(value, True)
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError):
        return  # NaN, a lone surrogate: nothing the gateway hashes (canonical may differ)
    assert canonical(value) == expected


def test_canonical_bytes_of_a_pinned_definition_do_not_change() -> None:
    """A lock file written before keeps matching: the bytes (and so the SHA-256) are fixed."""
    properties = {
        "q": {"type": "string", "maxLength": 100},
        "w": {"type": "number", "default": 1.0},
        "big": {"type": "number", "maximum": 1e16},
    }
    schema = {"type": "object", "properties": properties}
    definition = {"name": "search", "inputSchema": schema, "description": "Find · docs\u200b"}
    expected = (
        '{"description":"Find · docs\u200b","inputSchema":{"properties":'
        '{"big":{"maximum":1e+16,"type":"number"},"q":{"maxLength":100,"type":"string"},'
        '"w":{"default":1.0,"type":"number"}},"type":"object"},"name":"search"}'
    )
    assert canonical(definition) == expected.encode()
    assert canonical({"é": 1}, ascii_only=True) == b'{"\\u00e9":1}'


plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=24,
)


@PROPERTY
@given(plain, st.booleans())
def test_plain_copy_is_the_json_round_trip(value: Any, sort_keys: bool) -> None:
    copied = plain_copy(value, sort_keys=sort_keys)
    expected = json.loads(json.dumps(value, sort_keys=sort_keys))
    assert copied == expected
    assert json.dumps(copied) == json.dumps(expected)  # the same key order too


def test_plain_copy_shares_nothing_and_makes_mappings_and_tuples_plain() -> None:
    from types import MappingProxyType

    inner = {"a": [1, 2]}
    source = MappingProxyType({"m": MappingProxyType(inner), "t": (1, "x"), 3: Text("s")})
    copied = plain_copy(source)
    assert copied == {"m": {"a": [1, 2]}, "t": [1, "x"], "3": "s"}
    assert type(copied["3"]) is str and type(copied["m"]) is dict
    copied["m"]["a"].append(3)
    assert inner == {"a": [1, 2]}


@pytest.mark.parametrize(
    "value",
    [
        {"a": float("nan")},
        [float("inf")],
        {"d": datetime.date(2026, 1, 1)},
        {(1, 2): 1},
        {True: 1},
        {1: "a", "1": "b"},
        Point(1),
    ],
    ids=["NaN", "infinity", "date", "tuple key", "bool key", "1 and '1'", "dataclass"],
)
def test_plain_copy_refuses_what_json_cannot_hold(value: Any) -> None:
    with pytest.raises(JsonError) as info:
        plain_copy(value)
    assert info.value.kind == "syntax"


def test_plain_copy_byte_cap_at_the_limit_and_one_past() -> None:
    value = {"b": "é", "a": [1, 2]}
    size = len(canonical(value))
    assert plain_copy(value, max_bytes=size) == value
    with pytest.raises(JsonError) as info:
        plain_copy(value, max_bytes=size - 1)
    assert info.value.kind == "limit"
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(JsonError) as info:
        plain_copy(deep)
    assert info.value.kind == "limit"
