"""WHATWG §9.2 event-stream parsing: incremental, every line ending, bounded."""

from __future__ import annotations

import pytest

from gateway.backend.upstream.sse_parser import SseError, SseEvent, SseParser, SseTooLarge


def feed_all(parser: SseParser, data: bytes, step: int) -> list[SseEvent]:
    events: list[SseEvent] = []
    for start in range(0, len(data), step):
        events.extend(parser.feed(data[start : start + step]))
    return events


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1000])
@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_events_are_found_whatever_the_chunking_and_line_endings(step: int, eol: bytes) -> None:
    data = eol.join(
        [
            b"\xef\xbb\xbf: comment",
            b"event: message",
            b"id: 7",
            b'data: {"a":',
            b"data: 1}",
            b"",
            b"data:x",
            b"",
            b"retry: 10",
            b"event: other",
            b"data: y",
            b"",
            b"",
        ]
    )
    events = feed_all(SseParser(max_line=100, max_event=100), data, step)
    assert events == [
        SseEvent("message", '{"a":\n1}', "7"),
        SseEvent("message", "x", "7"),
        SseEvent("other", "y", "7"),
    ]


def test_an_empty_data_line_is_an_event_with_empty_data() -> None:
    # WHATWG HTML §9.2.6 "dispatch the event": "data:" appends "" and a LF, so the data buffer
    # is not empty and the event goes out, its data "" once the trailing LF is removed.
    parser = SseParser(max_line=50, max_event=50)
    assert parser.feed(b"id: 1\ndata:\n\n") == [SseEvent("message", "", "1")]
    assert parser.feed(b"data:\ndata:\n\n") == [SseEvent("message", "\n", "1")]


def test_an_event_without_data_is_not_dispatched() -> None:
    # §9.2.6: an empty data buffer (no data line at all) dispatches nothing.
    assert SseParser(max_line=50, max_event=50).feed(b"id: 1\n\n") == []
    assert SseParser(max_line=50, max_event=50).feed(b"event: x\nid: 2\n\n") == []


def test_a_line_at_the_cap_passes_and_one_past_fails() -> None:
    line = b"data: " + b"x" * 14  # 20 bytes
    assert SseParser(max_line=20, max_event=100).feed(line + b"\n\n")[0].data == "x" * 14
    with pytest.raises(SseTooLarge):
        SseParser(max_line=19, max_event=100).feed(line + b"\n\n")


def test_an_unterminated_line_past_the_cap_fails_before_its_end_arrives() -> None:
    parser = SseParser(max_line=10, max_event=100)
    with pytest.raises(SseTooLarge):
        for _ in range(5):
            parser.feed(b"data: xxxx")


def test_an_event_past_its_cap_fails() -> None:
    parser = SseParser(max_line=100, max_event=15)
    with pytest.raises(SseTooLarge):
        parser.feed(b"data: 12345\ndata: 12345\n")


def test_invalid_utf8_is_refused() -> None:
    with pytest.raises(SseError):
        SseParser(max_line=100, max_event=100).feed(b"data: \xff\n\n")
