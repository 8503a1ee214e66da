"""The reader's duplicate-name refusal without a Python call per object (issue 48): a text is
read without the hook only when a colon count proves the hooked decoder would read the same
value (``jsonkit.read._without_duplicates``); whatever the text, the outcome (the value, or the
refusal's reason and kind) is the hooked decoder's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.jsonkit.read import (
    _NOT_DECIDED,
    PEER,
    UNBOUNDED,
    JsonError,
    JsonLimits,
    _check_tree,
    _strict,
    _without_duplicates,
    loads,
    peer_limits,
)

PROPERTY = settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
LIMITS = (PEER, peer_limits(UNBOUNDED), JsonLimits(), JsonLimits(max_members=3))

REPLY = (
    b'{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"at 10:42: done\\n"}],'
    b'"structuredContent":{"url":"https://example.com/a?b=c","n":[1,2.5,null,true]},'
    b'"isError":false}}'
)


def _outcome(read: Any) -> tuple[str, Any]:
    try:
        return "value", read()
    except JsonError as exc:
        return "refused", (exc.reason, exc.kind)


def _hooked(data: bytes | str, limits: JsonLimits) -> tuple[str, Any]:
    """What the reader gave before issue 48: the hooked decoder, then the tree checks."""

    def read() -> Any:
        text = data if isinstance(data, str) else data.decode("utf-8")
        value = _strict(text, limits)
        _check_tree(value, text, len(data) if isinstance(data, bytes) else len(data) * 4, limits)
        return value

    return _outcome(read)


def test_a_typical_reply_is_read_without_the_hook() -> None:
    """The fast path is taken (else this file would test nothing)."""
    text = REPLY.decode()
    value = _without_duplicates(text, PEER)
    assert value == json.loads(text)
    assert loads(REPLY) == value


@pytest.mark.parametrize(
    "body",
    [
        b'{"a": 1, "a": 2}',
        b'{"a": 1, "\\u0061": 2}',
        b'{"x": {"a": "::", "a": 1}}',  # colons in the dropped value
        b'{"a": "x", "a": "y:"}',  # a colon in the value kept
        b'{"k": "\\u003a", "k": "x"}',  # an escaped colon
        b'{"k": "x", "k": "\\u003a"}',  # one that would make up for the member dropped
        b'{"a\\u003A": 1, "a:": 2}',  # one name, spelled twice
        b'[{"a": 1}, {"b": 2, "b": 2}]',
        b'{"a": {}, "a": {}}',
        b'{"": 0, "": 0}',
    ],
)
def test_a_repeated_name_is_refused_however_the_colons_fall(body: bytes) -> None:
    with pytest.raises(JsonError, match="duplicate object key"):
        loads(body)
    assert _without_duplicates(body.decode(), PEER) is _NOT_DECIDED


@pytest.mark.parametrize(
    "body",
    [
        b'{"big": 123456789012345678901234567890}',  # orjson does not write it: hooked path
        b'{"n": 1e400}',
        b'{"a": NaN}',
        b'{"a": 1,}',
        b'{"a": "\\ud800"}',
        b'{"a": 1} x',
        b'{"a": 1, "b": 2, "c": 3, "d": 4}',
        b'{"url": "http://x", "t": "\\u003a"}',
    ],
)
@pytest.mark.parametrize("limits", LIMITS)
def test_other_texts_read_as_the_hooked_decoder_reads_them(body: bytes, limits: JsonLimits) -> None:
    assert _outcome(lambda: loads(body, limits)) == _hooked(body, limits)


# --- properties -------------------------------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", ":", "a:", "\\u0061", "\\u003a", 'x\\"y', "\\n", ""])
_SCALARS = st.sampled_from(
    ["1", "-0.5", "1e400", "123456789012345678901234567890", "null", "true", '"::"', '"a:b"']
) | st.sampled_from(['"\\u003a"', '"\\u003A:"', '"\\ud800"', '"\\\\u003a"', "NaN", '"\\t"'])


@st.composite
def _texts(draw: st.DrawFn, depth: int = 0) -> str:
    """JSON-like texts with names that often repeat (escaped or not) and colons everywhere."""
    if depth > 2 or draw(st.integers(0, 3)) == 0:
        return draw(_SCALARS)
    if draw(st.booleans()):
        items = draw(st.lists(_texts(depth + 1), max_size=4))
        return "[" + ",".join(items) + "]"
    members = draw(
        st.lists(st.tuples(_NAMES, _texts(depth + 1)), max_size=5),
    )
    return "{" + ",".join(f'"{name}": {value}' for name, value in members) + "}"


@PROPERTY
@given(_texts(), st.sampled_from(LIMITS))
def test_every_text_reads_as_the_hooked_decoder_reads_it(text: str, limits: JsonLimits) -> None:
    body = text.encode()
    assert _outcome(lambda: loads(body, limits)) == _hooked(body, limits)
    assert _outcome(lambda: loads(text, limits)) == _hooked(text, limits)


@PROPERTY
@given(st.binary(max_size=120), st.sampled_from(LIMITS))
def test_arbitrary_bytes_read_as_the_hooked_decoder_reads_them(
    body: bytes, limits: JsonLimits
) -> None:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return
    if body.startswith(b"\xef\xbb\xbf"):
        return
    assert _outcome(lambda: loads(body, limits)) == _hooked(body, limits)
