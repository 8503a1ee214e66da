"""Issue 43 item 9: a client's U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR or U+0085 NEXT
LINE never reaches an access line or an audit event raw. JSON leaves them unescaped and many
readers (log shippers, editors, JavaScript, Python's ``str.splitlines``) take them for the end of
a line, so one request could forge the look of a second line. The production gateway over HTTP,
its JSON log into a buffer and its audit file on disk, both read back as bytes.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from gateway.commands.cli import build_parser
from tests.support.live_stack import ServerFactory, live_stack

BREAKS = "\u2028\u2029\u0085"
TOOL = f'echo{BREAKS}{{"event":"forged"}}'
SUBJECT = f"erin{BREAKS}admin"
RAW = tuple(c.encode() for c in BREAKS)


def read_lines(data: bytes) -> list[dict[str, Any]]:
    """The lines as a reader that splits on every line break would see them: each must still be
    one whole JSON object."""
    assert not any(raw in data for raw in RAW), data
    text = data.decode()
    assert text.splitlines() == text.split("\n")[:-1]  # no other line break in the text
    return [json.loads(line) for line in text.splitlines()]


async def test_line_breaks_in_client_strings_are_escaped_in_log_and_audit_lines(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    json_log: io.StringIO,
    capsys: pytest.CaptureFixture[str],
) -> None:
    audit = tmp_path / "audit.jsonl"
    (tmp_path / "gw").mkdir()
    gateway = {
        "audit": {"sink": "file", "path": str(audit)},
        "logging": {"subject": "plain"},
    }
    async with live_stack(tmp_path / "gw", aiohttp_server, monkeypatch, gateway=gateway) as stack:
        token = stack.token(sub=SUBJECT)
        status, _, text = await stack.legacy_call(token, TOOL, {"text": "x"})
        assert status == 200 and "error" in json.loads(text), text  # no such tool
    logged = read_lines(json_log.getvalue().encode())
    access = [line for line in logged if line.get("event") == "mcp.request"]
    assert {line["subject"] for line in access} == {SUBJECT}  # the same string once parsed
    assert TOOL in {line["tool"] for line in access}
    assert "\\u2028\\u2029\\u0085" in json_log.getvalue()  # written as JSON escapes
    (event,) = [e for e in read_lines(audit.read_bytes()) if e["event"] == "tool_call"]
    assert (event["tool"], event["subject"]) == (TOOL, SUBJECT)
    # The chain hashes the escaped bytes: the file verifies.
    args = build_parser().parse_args(["audit", "verify", str(audit)])
    assert args.handler(args) == 0, capsys.readouterr().out
