"""A text stream that records each write, to check how log lines reach stdout."""

from __future__ import annotations


class Recorder:
    """Stands in for stdout: every ``write`` call's text, in order, in :attr:`writes`."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False
