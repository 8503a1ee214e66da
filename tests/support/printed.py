"""What the code under test printed, for the leak tests (the ``out`` fixture, tests/conftest.py)."""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

import pytest

__all__ = ["Printed"]


class Printed:
    """What the code under test printed: stdout and stderr at the file descriptors (child
    threads and processes included) and stdlib logging at DEBUG; for the leak tests."""

    def __init__(
        self,
        capfd: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture,
        events: list[MutableMapping[str, Any]] | None = None,
    ):
        self._capfd, self._caplog = capfd, caplog
        caplog.set_level(logging.DEBUG)
        self.events: list[MutableMapping[str, Any]] = [] if events is None else events
        """The structlog events (the ``leaks`` fixture's; none for ``out``)."""

    def written(self) -> str:
        """stdout and stderr so far (read once: a second call returns what came since)."""
        return "".join(self._capfd.readouterr())

    def logged(self) -> str:
        return self._caplog.text
