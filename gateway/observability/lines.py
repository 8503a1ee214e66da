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
import sys
import threading
from typing import Final, TextIO

__all__ = ["PIPE_BUF", "LineWriter", "stdout_writer"]

PIPE_BUF: Final = 4096
"""POSIX guarantees atomic pipe writes up to PIPE_BUF bytes; 4096 on Linux (512 minimum)."""

_FLUSH_AT: Final = 256 * 1024
"""Pending bytes (roughly) that force a write before the iteration ends (bounded memory)."""


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
