"""WHATWG HTML §9.2 "Server-sent events" parsing, incremental and bounded.

MCP Streamable HTTP (2026-07-28 streamable-http.mdx §Sending Messages) lets a server answer a
request with a ``text/event-stream`` whose ``data`` fields each carry one JSON-RPC message. The
parser is fed raw byte chunks as they arrive and returns complete events; it never holds more
than one line of ``max_line`` bytes or one event of ``max_event`` bytes, and raises
:class:`SseError` (a fixed message) as soon as either bound is passed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["SseError", "SseEvent", "SseParser", "SseTooLarge"]

_BOM: Final = b"\xef\xbb\xbf"


class SseError(ValueError):
    """The stream is not well-formed."""


class SseTooLarge(SseError):
    """A line or an event passed its size bound."""


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str
    """The ``event`` field; ``message`` when absent (WHATWG default)."""
    data: str
    id: str | None = None


class SseParser:
    """Feed bytes with :meth:`feed`; collect the events it returns."""

    __slots__ = (
        "_buffer",
        "_data",
        "_data_bytes",
        "_event",
        "_id",
        "_max_event",
        "_max_line",
        "_skip_lf",
        "_started",
    )

    def __init__(self, *, max_line: int, max_event: int) -> None:
        self._max_line = max_line
        self._max_event = max_event
        self._buffer = bytearray()
        self._data: list[str] = []
        self._data_bytes = 0
        self._event = ""
        self._id: str | None = None
        self._skip_lf = False
        self._started = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Consume ``chunk``; return every event completed by it (possibly none)."""
        events: list[SseEvent] = []
        view = memoryview(chunk)
        start = 0
        if self._skip_lf and chunk[:1] == b"\n":
            start = 1
        self._skip_lf = False
        length = len(chunk)
        index = start
        while index < length:
            byte = chunk[index]
            if byte in (0x0A, 0x0D):  # \n or \r: end of line (\r\n counts once)
                self._buffer += view[start:index]
                self._line(bytes(self._buffer), events)
                self._buffer.clear()
                if byte == 0x0D:
                    if index + 1 < length:
                        if chunk[index + 1] == 0x0A:
                            index += 1
                    else:
                        self._skip_lf = True
                start = index + 1
            index += 1
        self._buffer += view[start:]
        if len(self._buffer) > self._max_line:
            raise SseTooLarge("event stream line too long")
        return events

    def _line(self, raw: bytes, events: list[SseEvent]) -> None:
        if len(raw) > self._max_line:
            raise SseTooLarge("event stream line too long")
        if not self._started:
            self._started = True
            raw = raw.removeprefix(_BOM)
        if not raw:
            self._dispatch(events)
            return
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SseError("event stream is not UTF-8") from exc
        if line.startswith(":"):
            return  # comment / keep-alive
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data_bytes += len(raw) + 1
            if self._data_bytes > self._max_event:
                raise SseTooLarge("event too large")
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\x00" not in value:
            self._id = value
        # "retry" and unknown fields are ignored (WHATWG §9.2.6).

    def _dispatch(self, events: list[SseEvent]) -> None:
        if self._data:
            events.append(SseEvent(self._event or "message", "\n".join(self._data), self._id))
        self._data = []
        self._data_bytes = 0
        self._event = ""
