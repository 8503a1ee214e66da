"""The batching line writer and the directly rendered access line.

Lines written while the loop runs leave together at the next iteration; every write holds whole
lines and at most PIPE_BUF bytes (workers share a stdout pipe); outside a loop a line goes out
at once. The direct access line carries what structlog's chain would have written (static
``worker`` field, redaction) and falls back to structlog when structlog is reconfigured.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest
from structlog.testing import capture_logs

from gateway.observability.lines import PIPE_BUF, LineWriter, json_line, printable
from gateway.observability.logging import REDACTED, configure, emit_info, get_logger
from tests.support.streams import Recorder

pytestmark = pytest.mark.usefixtures("restore_logging")


def test_outside_a_running_loop_each_line_is_written_at_once() -> None:
    out = Recorder()
    writer = LineWriter(out)  # type: ignore[arg-type]
    writer.write("one\n")
    assert out.writes == ["one\n"]
    writer.write("two\n")
    assert out.writes == ["one\n", "two\n"]


async def test_lines_of_one_iteration_leave_together_at_the_next() -> None:
    out = Recorder()
    writer = LineWriter(out)  # type: ignore[arg-type]
    for i in range(5):
        writer.write(f"line {i}\n")
        writer.flush()  # what loggers call after each line: no write yet
    assert out.writes == []
    await asyncio.sleep(0)
    assert out.writes == ["".join(f"line {i}\n" for i in range(5))]
    writer.write("later\n")
    await asyncio.sleep(0)
    assert out.writes[-1] == "later\n"


async def test_every_write_is_whole_lines_of_at_most_pipe_buf_bytes() -> None:
    out = Recorder()
    writer = LineWriter(out)  # type: ignore[arg-type]
    lines = [f'{{"n": {i}, "pad": "{"x" * (i % 300)}"}}\n' for i in range(200)]
    lines.insert(50, "é" * 1500 + "\n")  # 3001 bytes in 1501 characters
    lines.insert(120, "y" * (PIPE_BUF + 100) + "\n")  # longer than PIPE_BUF: written alone
    for line in lines:
        writer.write(line)
    await asyncio.sleep(0)
    assert "".join(out.writes) == "".join(lines)  # nothing lost, order kept
    assert len(out.writes) > 1
    for text in out.writes:
        assert text.endswith("\n")
        if text.count("\n") > 1:
            assert len(text.encode()) <= PIPE_BUF
    assert "y" * (PIPE_BUF + 100) + "\n" in out.writes


async def test_flush_now_writes_what_is_pending_and_a_large_backlog_goes_early() -> None:
    out = Recorder()
    writer = LineWriter(out)  # type: ignore[arg-type]
    writer.write("pending\n")
    writer.flush_now()  # serve() and the atexit hook call this
    assert out.writes == ["pending\n"]
    big = "z" * 1000 + "\n"
    for _ in range(300):  # ~300 KB in one iteration: written before the iteration ends
        writer.write(big)
    assert out.writes[1:]
    await asyncio.sleep(0)
    assert "".join(out.writes) == "pending\n" + big * 300


async def test_a_broken_stream_is_reported_not_raised(capsys: pytest.CaptureFixture[str]) -> None:
    class Broken(Recorder):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    writer = LineWriter(Broken())  # type: ignore[arg-type]
    writer.write("lost\n")
    await asyncio.sleep(0)  # the callback must not raise into the loop
    writer.write("lost too\n")
    writer.flush_now()


def _fields() -> dict[str, Any]:
    return {
        "request_id": "r1",
        "method": "tools/call",
        "tool": "Bearer sk-live-123",  # client-controlled text: masked like any value
        "status": 200,
        "jsonrpc_code": None,
        "duration_ms": 1.5,
        "client_secret": "hunter2",  # a secret-named key: masked
        "arguments": {"password": "x", "q": "string"},
    }


def test_the_direct_line_is_what_structlog_would_write_with_the_worker_field() -> None:
    out = Recorder()
    configure("json", "info", stream=out, static={"worker": 3})  # type: ignore[arg-type]
    log = get_logger("gateway.access")
    emit_info(log, "mcp.request", _fields())
    log.info("mcp.request", **_fields())  # the generic chain, for comparison
    direct, generic = (json.loads(text) for text in out.writes)
    assert out.writes[0].count("\n") == 1 and out.writes[0].endswith("\n")
    for line in (direct, generic):
        assert line["timestamp"].endswith("Z")
        del line["timestamp"]
    assert direct == generic
    assert direct["worker"] == 3
    assert direct["level"] == "info" and direct["event"] == "mcp.request"
    assert direct["tool"] == "Bearer " + REDACTED
    assert direct["client_secret"] == REDACTED
    assert direct["arguments"] == {"password": REDACTED, "q": "string"}
    assert "hunter2" not in out.writes[0] and "sk-live-123" not in out.writes[0]


def test_a_lone_surrogate_in_a_header_value_still_renders() -> None:
    out = Recorder()
    configure("json", "info", stream=out)  # type: ignore[arg-type]
    emit_info(get_logger("gateway.access"), "mcp.request", {"protocol_version": "2026\udcff"})
    assert json.loads(out.writes[0])["protocol_version"] == "2026\udcff"


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\u0085", "\x7f", "\x9b", "\x80"])
def test_json_line_escapes_what_a_reader_takes_for_a_line_break_or_a_control(char: str) -> None:
    record = {"tool": f"a{char}b", "plain": "caf\u00e9 \u200b", "ctl": "\x1b"}
    line = json_line(record)
    assert char not in line and f"\\u{ord(char):04x}" in line
    assert "caf\u00e9 \u200b" in line  # other text stays UTF-8 as it is
    assert json.loads(line) == record  # the same strings once parsed
    assert json_line({"x": f"{char}\udcff"}) == json.dumps(  # the fallback escapes too
        {"x": f"{char}\udcff"}, separators=(",", ":")
    ).replace("\x7f", "\\u007f")


def test_printable_shows_controls_separators_and_format_characters_as_escapes() -> None:
    assert printable("chain gw-0:1 caf\u00e9") == "chain gw-0:1 caf\u00e9"
    assert printable("a\x1b[2J\u2028\u0085\u202eb") == "a\\u001b[2J\\u2028\\u0085\\u202eb"


def test_capture_logs_console_and_a_higher_level_take_the_structlog_path() -> None:
    out = Recorder()
    configure("json", "info", stream=out)  # type: ignore[arg-type]
    log = get_logger("gateway.access")
    with capture_logs() as logs:
        emit_info(log, "mcp.request", {"status": 200})
    assert logs == [{"event": "mcp.request", "status": 200, "log_level": "info"}]
    assert out.writes == []
    configure("console", "info", stream=out)  # type: ignore[arg-type]
    emit_info(get_logger("gateway.access"), "mcp.request", {"status": 201})
    assert len(out.writes) == 1 and "201" in out.writes[0] and "{" not in out.writes[0]
    configure("json", "warning", stream=out)  # type: ignore[arg-type]
    emit_info(get_logger("gateway.access"), "mcp.request", {"status": 202})
    assert len(out.writes) == 1  # INFO is below the level: nothing written


def test_a_line_still_pending_when_the_loop_is_closed_is_written_at_exit() -> None:
    # The loop stops right after the line is written: its flush callback never runs; the
    # atexit hook of the stdout writer writes it.
    code = (
        "import asyncio\n"
        "from gateway.observability.logging import configure, get_logger\n"
        "configure('json', 'info')\n"
        "loop = asyncio.new_event_loop()\n"
        "def last():\n"
        "    get_logger('t').info('the.last.line')\n"
        "    loop.stop()\n"
        "loop.call_soon(last)\n"
        "loop.run_forever()\n"
        "loop.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert json.loads(done.stdout)["event"] == "the.last.line"


_PLAIN = {"request_id": "r1", "method": "tools/call", "status": 200, "duration_ms": 1.5}


@pytest.mark.parametrize(
    ("extra", "masked"),
    [
        ({}, None),  # nothing to mask: the line is written without the walk
        ({"tool": "Bearer sk-live-123"}, ("tool", "Bearer " + REDACTED)),
        ({"tool": "x BEARER sk-live-123"}, ("tool", "x Bearer " + REDACTED)),
        ({"client_secret": "hunter2"}, ("client_secret", REDACTED)),
        ({"arguments": {"password": "x"}}, ("arguments", {"password": REDACTED})),
        ({"scopes": ["Bearer sk-live-123"]}, ("scopes", ["Bearer " + REDACTED])),
        ({"tool": "{Bearer sk-live-123}"}, ("tool", "{Bearer " + REDACTED)),
        ({"tool": "a\u2028b"}, ("tool", "a\u2028b")),
    ],
)
def test_each_value_to_mask_is_masked_alone_as_structlog_masks_it(
    extra: dict[str, Any], masked: tuple[str, Any] | None
) -> None:
    """The direct line skips the redaction walk only when its text shows that the walk would
    change nothing (``logging._redacted_line``): each hazard alone still gets it."""
    out = Recorder()
    configure("json", "info", stream=out)  # type: ignore[arg-type]
    log = get_logger("gateway.access")
    emit_info(log, "mcp.request", {**_PLAIN, **extra})
    log.info("mcp.request", **_PLAIN, **extra)
    direct, generic = (json.loads(text) for text in out.writes)
    del direct["timestamp"], generic["timestamp"]
    assert direct == generic
    if masked is not None:
        assert direct[masked[0]] == masked[1]
    assert "sk-live-123" not in out.writes[0] and "hunter2" not in out.writes[0]
    assert "\u2028" not in out.writes[0]
