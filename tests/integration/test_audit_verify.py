"""The audit trail's hash chain on real output: the production gateway behind HTTP writes its
audit file, ``mcp-gateway audit verify`` passes it, and each kind of tampering fails at the
right line (docs/operations.md, "Verifying the audit trail")."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.commands.cli import build_parser
from gateway.observability.audit_chain import GENESIS, Chain, digest
from tests.support.live_stack import LiveStack, ServerFactory, live_stack
from tests.support.replicas import replica_stack


def main(argv: list[str]) -> int:
    """The command's handler as ``mcp-gateway`` runs it, without ``cli.main``'s logging set-up
    (which would reconfigure structlog for the rest of the test session)."""
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


EVENTS = 8


async def _calls(stack: LiveStack, count: int) -> None:
    token = stack.token()
    for index in range(count):
        if index % 3 == 2:  # a refused call is audited too
            status, _, _ = await stack.call(stack.token(scopes="mcp:access"), "echo", {"i": index})
            assert status == 403
        else:
            status, _, text = await stack.call(token, "echo", {"text": f"call {index}"})
            assert status == 200, text


@pytest.fixture
async def audited(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[LiveStack, Path]]:
    path = tmp_path / "audit.jsonl"
    (tmp_path / "a").mkdir()
    gateway = {"audit": {"sink": "file", "path": str(path)}}
    async with live_stack(tmp_path / "a", aiohttp_server, monkeypatch, gateway=gateway) as stack:
        await _calls(stack, EVENTS)
        yield stack, path


def verify(capsys: pytest.CaptureFixture[str], *paths: Path | str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["audit", "verify", *map(str, paths)])
    return code, capsys.readouterr().out


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


class TestRealOutput:
    async def test_every_event_is_linked_to_the_one_before(
        self, audited: tuple[LiveStack, Path]
    ) -> None:
        _, path = audited
        raw = path.read_bytes().splitlines()
        events = [json.loads(line) for line in raw]
        assert len(events) == EVENTS
        assert {event["chain"] for event in events} == {events[0]["chain"]}
        assert [event["seq"] for event in events] == list(range(1, EVENTS + 1))
        assert events[0]["prev"] == GENESIS
        for before, event in zip(raw, events[1:], strict=False):
            assert event["prev"] == digest(before)
        host_pid, _, started = events[0]["chain"].partition("@")
        assert host_pid.rsplit(":", 1)[1].isdigit()
        assert started.endswith("Z")

    async def test_an_intact_live_file_passes_and_says_signatures_were_not_checked(
        self, audited: tuple[LiveStack, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, path = audited
        code, out = verify(capsys, path)
        assert code == 0, out
        assert f"1 chain, {EVENTS} events: intact" in out
        assert "signatures not checked" in out

    async def test_the_installed_command_verifies(self, audited: tuple[LiveStack, Path]) -> None:
        _, path = audited
        done = subprocess.run(  # noqa: ASYNC221 - a short CLI call
            [sys.executable, "-m", "gateway.commands", "audit", "verify", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    async def test_an_edited_event_fails_at_its_line(
        self, audited: tuple[LiveStack, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, path = audited
        lines = lines_of(path)
        assert b'"decision":"deny"' in lines[2]
        lines[2] = lines[2].replace(b'"decision":"deny"', b'"decision":"allow"')
        code, out = verify(capsys, write(path, lines))
        assert code == 1
        assert out.startswith(f"{path}:3: edited event (seq 3)"), out

    async def test_an_edited_prev_fails_at_its_line(
        self, audited: tuple[LiveStack, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, path = audited
        lines = lines_of(path)
        event = json.loads(lines[4])
        lines[4] = lines[4].replace(event["prev"].encode(), b"f" * 64)
        code, out = verify(capsys, write(path, lines))
        assert (code, out.splitlines()[0]) == (1, f"{path}:5: edited event (seq 5)"), out

    async def test_a_deleted_event_fails_where_it_was(
        self, audited: tuple[LiveStack, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, path = audited
        lines = lines_of(path)
        del lines[3]
        code, out = verify(capsys, write(path, lines))
        assert code == 1
        assert out.splitlines()[0] == f"{path}:4: deleted event: seq 4 missing before seq 5", out

    async def test_swapped_events_fail_at_the_first_one_out_of_place(
        self, audited: tuple[LiveStack, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, path = audited
        lines = lines_of(path)
        lines[4], lines[5] = lines[5], lines[4]
        code, out = verify(capsys, write(path, lines))
        assert code == 1
        assert out.splitlines()[0] == f"{path}:5: reordered event: seq 6 comes before seq 5", out

    async def test_an_inserted_copy_fails_at_the_copy(
        self, audited: tuple[LiveStack, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, path = audited
        lines = lines_of(path)
        lines.insert(2, lines[1])
        code, out = verify(capsys, write(path, lines))
        assert code == 1
        assert out.splitlines()[0] == f"{path}:3: inserted event: seq 2 repeated", out

    async def test_a_forged_event_in_the_middle_fails_at_the_forgery(
        self, audited: tuple[LiveStack, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        # Linked correctly to the event before it (whoever forged it could compute that
        # hash), but the genuine event with its seq follows and the chain goes on from that.
        _, path = audited
        lines = lines_of(path)
        forged = lines[3].replace(b'"status":200', b'"status":201')
        assert forged != lines[3]
        lines.insert(3, forged)
        code, out = verify(capsys, write(path, lines))
        assert code == 1
        assert out.splitlines()[0].startswith(f"{path}:4: inserted event: a second seq 4"), out

    async def test_a_line_cut_in_half_fails_at_that_line(
        self, audited: tuple[LiveStack, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, path = audited
        data = path.read_bytes()
        cut = data.rindex(b"\n", 0, len(data) - 1) + 40
        path.write_bytes(data[:cut])
        code, out = verify(capsys, path)
        assert code == 1
        assert out.splitlines()[0] == (
            f"{path}:{EVENTS}: line cut in half (the file ends inside an event)"
        ), out

    async def test_a_file_that_cannot_be_read_is_exit_2(
        self, audited: tuple[LiveStack, Path], capsys: pytest.CaptureFixture[str]
    ) -> None:
        _, path = audited
        capsys.readouterr()
        assert main(["audit", "verify", str(path), str(path.parent / "missing.jsonl")]) == 2
        assert "cannot read" in capsys.readouterr().err
        with pytest.raises(SystemExit) as exc:
            main(["audit", "verify"])
        assert exc.value.code == 2


async def test_rotated_files_verify_together_in_any_order(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rotated = {"sink": "file", "path": str(tmp_path / "a.jsonl"), "max_bytes": 4096, "backups": 20}
    (tmp_path / "a").mkdir()
    async with live_stack(
        tmp_path / "a", aiohttp_server, monkeypatch, gateway={"audit": rotated}
    ) as a:
        await _calls(a, 24)
    files = sorted(tmp_path.glob("a.jsonl*"))  # noqa: ASYNC240 - newest (a.jsonl) first
    assert len(files) >= 3  # the current file and at least two rotated ones
    chains = {json.loads(line)["chain"] for f in files for line in f.read_bytes().splitlines()}
    assert len(chains) == 1
    code, out = verify(capsys, *files)
    assert code == 0, out
    assert "1 chain, 24 events: intact" in out

    # Only the newest file: the chain starts after its first events, which is said, not failed.
    code, out = verify(capsys, tmp_path / "a.jsonl")
    assert code == 0, out
    assert "events before it are not in the files given" in out

    # A rotated file missing from the middle is a gap.
    middle = sorted(files, reverse=True)[1]
    first: dict[str, Any] = json.loads(lines_of(middle)[0])
    code, out = verify(capsys, *(f for f in files if f != middle))
    assert code == 1
    assert f"deleted event: seq {first['seq']}" in out


async def test_several_replicas_stdout_captures_verify_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two ``mcp-gateway serve`` processes with the stdout sink: each capture holds the
    application log and one chain; both verify together, and merged into one stream."""
    async with replica_stack(tmp_path, None, replicas=2) as stack:
        token = stack.mint()
        for index in range(6):
            replica = stack.replicas[index % 2]
            status, payload, _ = await stack.call(replica, token, "echo", text=str(index))
            assert status == 200, payload
        for replica in stack.replicas:
            assert replica.stop() == 0
        logs = [replica.log_path for replica in stack.replicas]
    code, out = verify(capsys, *logs)
    assert code == 0, out
    assert "2 chains, 6 events: intact" in out
    assert "other lines skipped" in out  # the application log beside the events
    merged: list[bytes] = []
    for pair in zip(lines_of(logs[0]), lines_of(logs[1]), strict=False):
        merged.extend(pair)
    longer = max(logs, key=lambda p: len(lines_of(p)))
    merged.extend(lines_of(longer)[len(merged) // 2 :])
    code, out = verify(capsys, write(tmp_path / "merged.log", merged))
    assert code == 0, out
    assert "2 chains, 6 events: intact" in out


async def test_a_chain_id_from_the_file_is_printed_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 43 item 9: what ``audit verify`` prints of a file (a chain id, a ``kid``) comes
    from whoever wrote the file: a terminal escape sequence or a line break in it is printed as
    ``\\uXXXX``, never raw."""
    hostile = "gw\x1b]0;pwned\x07\x1b[2J\u2028\u0085\u202e:1"
    chain = Chain(replica=hostile, started=1_796_000_000.0)
    lines = [chain.link('{"log":"audit","event":"tool_call"}') for _ in range(3)]
    path = write(tmp_path / "audit.jsonl", [f"{line}\n".encode() for line in lines[:2]])
    code, out = verify(capsys, path)
    assert code == 0, out
    assert all(c.isprintable() for c in out.replace("\n", "")), out
    assert "chain gw\\u001b]0;pwned\\u0007\\u001b[2J\\u2028\\u0085\\u202e:1@2026-11-30" in out
    # A note (the chain starts after seq 1 in the files given) names the chain too.
    path = write(tmp_path / "audit.jsonl", [f"{line}\n".encode() for line in lines[1:]])
    code, out = verify(capsys, path)
    assert code == 0 and "note: chain gw\\u001b]0;pwned" in out, out
    assert all(c.isprintable() for c in out.replace("\n", "")), out
