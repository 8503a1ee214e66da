"""Each log line reaches the stream in one write (workers of ``serve --workers N`` share a
stdout: a line written in two calls could be split by another process's line)."""

from __future__ import annotations

import logging

import pytest

from gateway.observability.logging import configure, get_logger
from tests.support.streams import Recorder

pytestmark = pytest.mark.usefixtures("restore_logging")


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
