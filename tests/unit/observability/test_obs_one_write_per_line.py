"""Each log line reaches the stream in one write (workers of ``serve --workers N`` share a
stdout: a line written in two calls could be split by another process's line)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog

from gateway.observability.logging import configure, get_logger


class Recorder:
    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_a_line_and_its_newline_are_one_write(fmt: str) -> None:
    out = Recorder()
    configure(fmt, "info", stream=out, static={"worker": 1})  # type: ignore[arg-type]
    get_logger("test.one_write").info("mcp.request", status=200)
    logging.getLogger("aiohttp.server").warning("stdlib line")
    assert len(out.writes) == 2
    assert all(text.endswith("\n") and text.count("\n") == 1 for text in out.writes)
    if fmt == "json":
        assert '"worker": 1' in out.writes[0]
