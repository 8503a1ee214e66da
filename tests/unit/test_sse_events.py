"""The one SSE writer (gateway/http/sse.py), by property: for any JSON-RPC message, strings with
CR, LF, NEL, U+2028/U+2029 and NUL included, an independent SSE parser (httpx2's, the one the
MCP python-sdk's client reads with) reading the event's bytes sees exactly one ``message`` event
whose data parses back to the same message; a stream of such events with keepalives between
them, cut into chunks anywhere (inside a UTF-8 sequence too), reads as the same messages in
order."""

from __future__ import annotations

import json
from typing import Any

import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.http.sse import KEEPALIVE, SSE_HEADERS, json_event

PROPERTY = settings(
    max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

awkward = st.sampled_from(["\r", "\n", "\r\n", "\x85", "\u2028", "\u2029", "\x00", "\ufeff", ":"])
texts = st.lists(st.text(max_size=8) | awkward, max_size=4).map("".join)
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=12,
)
ids = st.integers(min_value=-(2**53), max_value=2**53) | texts
requests = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0"), "method": texts},
    optional={"id": ids, "params": st.dictionaries(texts, values, max_size=3)},
)
results = st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": ids, "result": values})
errors = st.fixed_dictionaries(
    {
        "jsonrpc": st.just("2.0"),
        "id": ids | st.none(),
        "error": st.fixed_dictionaries(
            {"code": st.integers(-32768, 32767), "message": texts}, optional={"data": values}
        ),
    }
)
messages = requests | results | errors


def parsed(chunks: list[bytes]) -> list[httpx2.ServerSentEvent]:
    response = httpx2.Response(
        200,
        headers=SSE_HEADERS,
        content=iter(chunks),
        request=httpx2.Request("GET", "http://127.0.0.1/mcp"),
    )
    return list(httpx2.EventSource(response, max_event_size=None))


@PROPERTY
@given(messages)
def test_one_message_is_one_event_whose_data_is_the_message(message: dict[str, Any]) -> None:
    event = json_event(message)
    assert event.count(b"\n") == 3 and b"\r" not in event  # event, data and the blank line
    (only,) = parsed([event])
    assert only.event == "message"
    assert json.loads(only.data) == message


@PROPERTY
@given(st.lists(messages, min_size=1, max_size=4), st.data())
def test_a_stream_cut_anywhere_reads_as_the_same_messages_in_order(
    sent: list[dict[str, Any]], data: st.DataObject
) -> None:
    stream = b"".join(KEEPALIVE + json_event(message) for message in sent) + KEEPALIVE
    cuts = sorted(data.draw(st.sets(st.integers(1, len(stream) - 1), max_size=6), label="cuts"))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    events = parsed(chunks)
    assert [event.event for event in events] == ["message"] * len(sent)
    assert [json.loads(event.data) for event in events] == sent
