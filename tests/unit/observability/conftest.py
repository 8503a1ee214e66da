"""Fixtures for the observability unit tests: isolate structlog and stdlib logging state."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog


@pytest.fixture(autouse=True)
def _isolated_logging() -> Iterator[None]:
    """Each test starts from structlog's defaults and leaves the root logger as it found it."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)
