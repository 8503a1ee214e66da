"""The audit hash chain as the sinks write it, and the verifier's corner cases (the tampering
cases on real gateway output are in tests/integration/test_audit_verify.py)."""

from __future__ import annotations

import asyncio
import io
import json
import threading
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gateway.config import AuditConfig
from gateway.observability.audit import AuditSink
from gateway.observability.audit_chain import GENESIS, Chain, Signer, digest
from gateway.observability.audit_verify import verify_files
from gateway.observability.lines import LineWriter
from tests.support.audit_record import audit_event


def reasons(data: bytes) -> list[str]:
    return [str(item) for item in verify_files([("f", data)]).breaks]


def test_link_appends_chain_seq_prev_and_hashes_the_bytes_written() -> None:
    chain = Chain(replica="pod-1:7", started=1_796_000_000.0)
    first = chain.link('{"a":1}')
    second = chain.link('{"b":2}')
    assert first == '{"a":1,"chain":"pod-1:7@2026-11-30T00:53:20.000000Z","seq":1,"prev":"' + (
        GENESIS + '"}'
    )
    assert json.loads(second)["prev"] == digest(first.encode())
    assert (chain.seq, chain.head) == (2, digest(second.encode()))


def test_a_lone_surrogate_is_written_as_its_json_escape_and_verifies() -> None:
    stream = io.StringIO()
    sink = AuditSink(None, stream=stream)
    sink.emit(audit_event(1, tool="bad\udc80name"), 0.0)
    sink.emit(audit_event(2), 0.0)
    data = stream.getvalue().encode()  # would raise if a surrogate were left in the text
    assert b"\\udc80" in data
    assert reasons(data) == []


async def test_the_stdout_sink_batches_in_order_within_one_loop_iteration() -> None:
    out = io.StringIO()
    sink = AuditSink(None, stream=LineWriter(out))  # type: ignore[arg-type]
    for n in range(200):
        sink.emit(audit_event(n), 0.0)
    assert out.getvalue() == ""  # batched: written at the end of the iteration
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    lines = out.getvalue().splitlines()
    assert [json.loads(line)["seq"] for line in lines] == list(range(1, 201))
    assert reasons(out.getvalue().encode()) == []


def test_threads_writing_one_file_sink_keep_one_unbroken_chain(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    sink = AuditSink.from_config(AuditConfig(sink="file", path=str(path)))

    def write(base: int) -> None:
        for n in range(200):
            sink.emit(audit_event(base + n), 0.0)

    threads = [threading.Thread(target=write, args=(k * 1000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sink.close()
    report = verify_files([(str(path), path.read_bytes())])
    assert (report.breaks, report.events) == ([], 800)


def test_the_off_sink_writes_nothing_and_links_nothing() -> None:
    sink = AuditSink.from_config(AuditConfig(sink="off"))
    sink.emit(audit_event(1), 0.0)
    assert not sink.enabled


class TestVerifierCornerCases:
    def lines(self, count: int) -> list[bytes]:
        chain = Chain(replica="pod:1", started=0.0)
        return [chain.link(audit_event(n).to_json(0.0)).encode() + b"\n" for n in range(count)]

    def test_an_audit_event_without_its_chain_fields_is_a_break(self) -> None:
        lines = self.lines(3)
        lines.insert(1, audit_event(9).to_json(0.0).encode() + b"\n")
        assert reasons(b"".join(lines)) == [
            "f:2: audit event without its chain fields (chain, seq, prev)"
        ]

    def test_a_damaged_line_in_the_middle_is_a_break(self) -> None:
        lines = self.lines(3)
        lines[1] = lines[1][:50] + b"\n"
        assert reasons(b"".join(lines))[0] == "f:2: damaged event: not valid JSON"

    def test_a_first_event_that_does_not_start_from_genesis_is_a_break(self) -> None:
        lines = self.lines(3)
        lines[0] = lines[0].replace(GENESIS.encode(), b"1" * 64)
        assert reasons(b"".join(lines)) == ["f:1: edited event: seq 1 does not start the chain"]

    def test_a_final_newline_missing_after_a_whole_event_is_not_a_break(self) -> None:
        data = b"".join(self.lines(3))
        assert reasons(data[:-1]) == []

    def test_foreign_lines_are_skipped_and_counted(self) -> None:
        lines = self.lines(2)
        lines[1:1] = [b"plain text\n", b'{"log":"app"}\n', b"\n"]
        report = verify_files([("f", b"".join(lines))])
        assert (report.breaks, report.events, report.skipped) == ([], 2, 3)


class TestCheckpoints:
    def sink(self, every: int) -> tuple[AuditSink, io.StringIO, Ed25519PrivateKey]:
        key = Ed25519PrivateKey.generate()
        stream = io.StringIO()
        return AuditSink(None, stream=stream, signer=Signer(key, every)), stream, key

    def test_every_n_events_and_at_close_a_signed_checkpoint_that_verifies(self) -> None:
        sink, stream, key = self.sink(2)
        for n in range(5):
            sink.emit(audit_event(n), 0.0)
        assert sink.checkpoint_jwk is not None and "d" not in sink.checkpoint_jwk
        kid = sink.checkpoint_jwk["kid"]
        sink.close()
        records = [json.loads(line) for line in stream.getvalue().splitlines()]
        checkpoints = [
            (r["seq"], r["final"], r["events"], r["kid"])
            for r in records
            if r["event"] == "audit_checkpoint"
        ]
        assert checkpoints == [(3, False, 2, kid), (6, False, 5, kid), (8, True, 7, kid)]
        report = verify_files(
            [("f", stream.getvalue().encode())], {kid: key.public_key()}, complete=True
        )
        assert (report.breaks, report.signatures, report.chains[0].closed) == ([], 3, True)

    def test_a_checkpoint_that_miscounts_is_a_bad_checkpoint(self) -> None:
        sink, stream, key = self.sink(1)
        sink.emit(audit_event(1), 0.0)
        line = stream.getvalue().splitlines()[1]
        record = json.loads(line)
        record["events"] = 5
        body = {k: v for k, v in record.items() if k not in ("chain", "seq", "prev", "sig")}
        chain = Chain()
        first = chain.link(audit_event(1).to_json(0.0))
        forged = chain.link(json.dumps(body, separators=(",", ":")), Signer(key, 1).sign)
        data = (first + "\n" + forged + "\n").encode()
        kid = Signer(key, 1).kid
        assert [str(b) for b in verify_files([("f", data)], {kid: key.public_key()}).breaks] == [
            "f:2: bad checkpoint: it counts 5 events before it, the chain 1"
        ]

    def legacy(
        self, every: int, events: int, checkpoints: int = 1_000
    ) -> tuple[list[bytes], dict[str, Any]]:
        """A chain as the gateway wrote it before checkpoints declared ``every`` (and, with
        ``checkpoints``, as it reads once the later ones were dropped and the chain relinked)."""
        key = Ed25519PrivateKey.generate()
        signer = Signer(key, every)
        chain = Chain()
        lines = []
        for n in range(1, events + 1):
            lines.append(chain.link(audit_event(n).to_json(0.0)))
            if n % every == 0 and n // every <= checkpoints:
                record = {
                    "log": "audit",
                    "event": "audit_checkpoint",
                    "kid": signer.kid,
                    "final": False,
                    "events": chain.seq,
                }
                lines.append(chain.link(json.dumps(record, separators=(",", ":")), signer.sign))
        return [(line + "\n").encode() for line in lines], {signer.kid: key.public_key()}

    def test_a_legacy_chain_s_cadence_is_read_from_where_its_checkpoints_stand(self) -> None:
        lines, keys = self.legacy(3, 6)  # checkpoints at seq 4 and 8, the last line
        report = verify_files([("f", b"".join(lines))], keys)
        assert report.verified and report.chains[0].every == 3
        assert report.chains[0].uncovered is None
        lines, keys = self.legacy(3, 8)  # seq 9 and 10 after the last checkpoint: open
        report = verify_files([("f", b"".join(lines))], keys)
        assert report.verified and report.chains[0].uncovered == (9, 10)
        # The start rotated away: two checkpoints still say how far apart they stand.
        assert verify_files([("f", b"".join(lines[3:]))], keys).verified
        # One checkpoint without the chain's start declares no cadence: its tail is unverified.
        report = verify_files([("f", b"".join(lines[5:]))], keys)
        assert report.intact and not report.verified
        assert [str(b) for b in report.unverified] == [
            "f:4: unverified: no signature covers seq 9-10: they follow the last checkpoint "
            "(f:3), whose cadence the checkpoints do not declare"
        ]
        lines, keys = self.legacy(3, 8, checkpoints=1)  # the later checkpoints never written
        report = verify_files([("f", b"".join(lines))], keys)
        assert [str(b) for b in report.unverified] == [
            "f:5: unverified: no signature covers seq 5-9: 5 events follow the last checkpoint "
            "(f:4), more than its cadence leaves unsigned (every 3): checkpoints dropped?"
        ]
