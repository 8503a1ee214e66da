"""gateway.protocol.jsonencode.compact: orjson's speed, the standard encoder's results.

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

from gateway.protocol.jsonencode import compact

PROPERTY = settings(max_examples=400, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])  # fmt: skip

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
    ids=["nan", "inf", "-inf", "long with null and nan", "long with null", "nested inf",
         "beyond 64 bits", "int key", "subclasses", "dataclass",
         "datetime", "lone surrogate", "set", "tuple", "sorting and escapes"],
)  # fmt: skip
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
