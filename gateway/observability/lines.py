"""Batched line output: the log lines, access lines and audit events of one event-loop
iteration leave the process together, in as few writes as possible.

One write per line (two per ``tools/call``: the access line and the audit event) was a
system call each and a measurable share of the hot path (docs/performance.md). A
:class:`LineWriter` collects the lines written while the event loop runs and writes them at the
start of the next loop iteration (``loop.call_soon``): a line is out within one iteration of
being written, which is well under 50 ms unless the loop itself is stuck. Outside a running loop
(startup, the CLI, other threads) a line is written at once. :meth:`LineWriter.flush_now`
writes what is pending; ``serve()`` calls it after the drain and an ``atexit`` hook calls it at
interpreter exit, so SIGTERM (and an exception leaving ``asyncio.run``) loses nothing; only a
SIGKILL can lose the lines of the iteration it interrupts.

What a line may contain is decided here too: :func:`json_line` renders every JSON log line
the gateway writes itself (the access line, :func:`~.logging.emit_info`) and every audit event
(:mod:`.audit`), and :func:`printable` every line a command prints from untrusted text.

Every write holds whole lines and, when several lines go together, at most ``PIPE_BUF``
(4096) bytes: the workers of ``serve --workers N`` share one stdout, and a write of at most
``PIPE_BUF`` bytes to a pipe is atomic (POSIX), so their lines never interleave mid-line. (A
single line longer than that is written alone, as it always was.) Regular files opened for
append (``>>``) are atomic per write anyway.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import re
import sys
import threading
from collections.abc import Mapping
from typing import Any, Final, TextIO

import orjson

__all__ = [
    "PIPE_BUF",
    "LineWriter",
    "compact_text",
    "json_line",
    "line_of",
    "printable",
    "stdout_writer",
]

PIPE_BUF: Final = 4096
"""POSIX guarantees atomic pipe writes up to PIPE_BUF bytes; 4096 on Linux (512 minimum)."""

_FLUSH_AT: Final = 256 * 1024
"""Pending bytes (roughly) that force a write before the iteration ends (bounded memory)."""


_BREAKS: Final = re.compile("[\x7f-\x9f\u2028\u2029]")
"""What JSON leaves raw that a reader can take for the end of a line or a terminal control:
DEL and the C1 controls (U+0085 NEL is a line break to some log shippers and editors, U+009B a
CSI to some terminals), U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR (line breaks to
JavaScript and to many viewers). The C0 controls JSON escapes itself."""


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_line(record: Mapping[str, Any]) -> str:
    """One log or audit line: compact JSON, UTF-8 as is, every control character and line or
    paragraph separator written as its ``\\uXXXX`` escape (:data:`_BREAKS`: the same string once
    parsed), so no value a client sent can end a line early or reach a terminal raw. A lone
    surrogate or a value orjson does not take (it raises ``TypeError``) goes through the
    standard encoder, all non-ASCII escaped."""
    text = compact_text(record)
    if text is None:
        text = json.dumps(record, separators=(",", ":"), default=repr)
    return line_of(text)


def compact_text(record: Mapping[str, Any]) -> str | None:
    """orjson's compact JSON of ``record`` (:func:`json_line` before :func:`line_of`), None
    for a value orjson does not take."""
    try:
        return orjson.dumps(record).decode()
    except TypeError:
        return None


def line_of(line: str) -> str:
    """:func:`json_line`'s last step: the compact JSON ``line`` (orjson's, decoded, or the
    standard encoder's) with the characters of :data:`_BREAKS` escaped."""
    if line.isascii():
        return line if "\x7f" not in line else _BREAKS.sub(_escape, line)
    return _BREAKS.sub(_escape, line)


def printable(text: str) -> str:
    """``text`` for a terminal: every character that prints as nothing or acts on the terminal
    (controls, format characters such as bidirectional overrides, line and paragraph
    separators) as ``\\uXXXX``; other text as is."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


class LineWriter:
    """A text stream for whole lines (``write(line + "\\n")``) that batches per loop iteration.

    ``stream`` is where lines go; ``None`` means whatever ``sys.stdout`` is *at write time*
    (loggers are cached on first use, and a test runner or a daemonizing wrapper may replace
    ``sys.stdout`` later). ``flush()`` is the file-like no-op that loggers call after each line:
    the batch is written at the end of the iteration, or at once outside a running loop.
    """

    __slots__ = ("__weakref__", "_lock", "_pending", "_scheduled", "_size", "_stream")

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._pending: list[str] = []
        self._size = 0
        self._scheduled = False
        self._lock = threading.Lock()

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stdout

    def write(self, text: str) -> int:
        self._pending.append(text)
        self._size += len(text)
        if not self._scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop in this thread: write through
                self.flush_now()
                return len(text)
            self._scheduled = True
            loop.call_soon(self.flush_now)
        elif self._size > _FLUSH_AT:
            self.flush_now()
        return len(text)

    def flush(self) -> None:
        """Loggers call this after every line; the batch goes out at the iteration's end."""

    def isatty(self) -> bool:
        return self.stream.isatty()

    def flush_now(self) -> None:
        """Write everything pending: whole lines, at most PIPE_BUF bytes per write."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._size = 0
            self._scheduled = False
            if not pending:
                return
            stream = self.stream
            try:
                chunk: list[str] = []
                size = 0
                for text in pending:
                    n = len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
                    if chunk and size + n > PIPE_BUF:
                        stream.write("".join(chunk))
                        stream.flush()
                        chunk, size = [], 0
                    chunk.append(text)
                    size += n
                stream.write("".join(chunk))
                stream.flush()
            except (OSError, ValueError) as exc:
                # stdout closed or broken: nothing to write to; say so once on stderr (never
                # through logging, which would write here again).
                _report(exc)


_reported: list[bool] = []


def _report(exc: BaseException) -> None:
    if not _reported:
        _reported.append(True)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.__stderr__.write(f"mcp-gateway: cannot write log lines: {exc!r}\n")  # type: ignore[union-attr]


_stdout_writer = LineWriter()
atexit.register(_stdout_writer.flush_now)


def stdout_writer() -> LineWriter:
    """The process's writer to standard output: application log, access lines and the stdout
    audit sink share it, so their lines keep their order."""
    return _stdout_writer
