"""Signed audit checkpoints on real output: the production gateway behind HTTP with
``audit.checkpoint`` writes a signed checkpoint every ``every`` events and a final one at
shutdown (SIGTERM included), publishes the key in the ops listener's JWK Set, and
``mcp-gateway audit verify --key | --jwks [--complete]`` catches truncation at an event
boundary and a re-signed (forged) chain (docs/operations.md, "Verifying the audit trail")."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import aiohttp
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from gateway.commands.cli import build_parser
from gateway.observability.audit_chain import Chain, Signer
from tests.support.live_stack import LiveStack, ServerFactory, live_stack
from tests.support.replicas import replica_stack


def main(argv: list[str]) -> int:
    """The command's handler as ``mcp-gateway`` runs it, without ``cli.main``'s logging set-up
    (which would reconfigure structlog for the rest of the test session)."""
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


CALLS = 8
EVERY = 3


def write_key(directory: Path, name: str = "audit-key") -> tuple[Path, Path, Ed25519PrivateKey]:
    key = Ed25519PrivateKey.generate()
    private = directory / f"{name}.pem"
    public = directory / f"{name}.pub.pem"
    private.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    public.write_bytes(
        key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public, key


def verify(capsys: pytest.CaptureFixture[str], *args: Path | str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["audit", "verify", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


async def _calls(stack: LiveStack, count: int) -> None:
    token = stack.token()
    for index in range(count):
        status, _, text = await stack.call(token, "echo", {"text": f"call {index}"})
        assert status == 200, text


class Files:
    def __init__(self, tmp_path: Path) -> None:
        tmp_path.joinpath("gw").mkdir()
        self.audit = tmp_path / "audit.jsonl"
        self.private, self.public, self.key = write_key(tmp_path)
        self.jwks: dict[str, object] = {}
        self.live: tuple[int, str] = (0, "")
        self.live_complete: tuple[int, str] = (0, "")


@pytest.fixture
async def stopped(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> AsyncIterator[Files]:
    """A gateway run with checkpoints every 3 events: verified live (through the ops
    listener's JWK Set), then stopped cleanly."""
    files = Files(tmp_path)
    audit = {
        "sink": "file",
        "path": str(files.audit),
        "checkpoint": {"key": {"file": str(files.private)}, "every": EVERY},
    }
    async with live_stack(
        tmp_path / "gw", aiohttp_server, monkeypatch, gateway={"audit": audit}
    ) as stack:
        await _calls(stack, CALLS)
        jwks_url = stack.server.ops_url + "/.well-known/jwks.json"
        async with aiohttp.ClientSession() as session, session.get(jwks_url) as response:
            assert response.status == 200
            files.jwks = await response.json()
        # In a thread: the command runs its own event loop to fetch the JWK Set.
        files.live = await asyncio.to_thread(verify, capsys, "--jwks", jwks_url, files.audit)
        files.live_complete = await asyncio.to_thread(
            verify, capsys, "--jwks", jwks_url, "--complete", files.audit
        )
    yield files


def events(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def relink(path: Path, written: list[dict[str, object]], forger: Signer | None = None) -> None:
    """Write ``written`` to ``path`` as one chain recomputed from its first event (what anyone
    who can write the file can do); checkpoints re-signed by ``forger`` under their genuine
    ``kid``, else keeping their genuine signature (valid while nothing before them changed)."""
    replica, _, stamp = str(written[0]["chain"]).rpartition("@")
    chain = Chain(replica, datetime.fromisoformat(stamp).timestamp())  # the same chain id
    assert chain.id == written[0]["chain"]
    lines = []
    for event in written:
        body = {k: v for k, v in event.items() if k not in ("chain", "seq", "prev", "sig")}
        rendered = json.dumps(body, separators=(",", ":"))
        sign = None
        if is_checkpoint(event):
            sign = forger.sign if forger is not None else (lambda _, sig=event["sig"]: str(sig))
        lines.append(chain.link(rendered, sign) + "\n")
    path.write_text("".join(lines))


def is_checkpoint(event: dict[str, object]) -> bool:
    return event["event"] == "audit_checkpoint"


class TestCheckpoints:
    async def test_the_ops_listener_publishes_the_checkpoint_key(self, stopped: Files) -> None:
        (jwk,) = [k for k in stopped.jwks["keys"] if k.get("kty") == "OKP"]  # type: ignore[attr-defined]
        assert jwk["crv"] == "Ed25519" and jwk["alg"] == "EdDSA"
        assert "d" not in jwk  # never the private part
        assert {event.get("kid") for event in events(stopped.audit) if "kid" in event} == {
            jwk["kid"]
        }

    async def test_a_checkpoint_every_3_events_and_a_final_one_at_shutdown(
        self, stopped: Files
    ) -> None:
        written = events(stopped.audit)
        kinds = [
            (e["seq"], e["event"], e.get("final"), e.get("events"))
            for e in written
            if e["event"] == "audit_checkpoint"
        ]
        assert kinds == [
            (4, "audit_checkpoint", False, 3),
            (8, "audit_checkpoint", False, 7),
            (11, "audit_checkpoint", True, 10),
        ]
        assert len(written) == CALLS + 3

    async def test_the_live_file_verifies_and_says_what_follows_the_last_checkpoint(
        self, stopped: Files
    ) -> None:
        code, out = stopped.live
        assert code == 0, out
        # The open tail of a live file (fewer than every 3): named, not refused.
        assert "(every 3), 2 events after the last checkpoint, no signature covers seq 9-10" in out
        assert "2 checkpoint signatures verified" in out
        code, out = stopped.live_complete
        assert code == 1, out
        assert f"{stopped.audit}:10: incomplete: the chain ends without its final checkpoint" in out

    async def test_after_a_clean_stop_the_archive_is_complete(
        self, stopped: Files, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, out = verify(capsys, "--key", stopped.public, "--complete", stopped.audit)
        assert code == 0, out
        assert "closed by its final checkpoint" in out
        assert "3 checkpoint signatures verified" in out
        jwks_file = stopped.audit.with_name("jwks.json")
        jwks_file.write_text(json.dumps(stopped.jwks))
        assert verify(capsys, "--jwks", jwks_file, "--complete", stopped.audit)[0] == 0

    async def test_a_file_truncated_at_an_event_boundary_fails_only_with_complete(
        self, stopped: Files, capsys: pytest.CaptureFixture[str]
    ) -> None:
        lines = stopped.audit.read_bytes().splitlines(keepends=True)
        stopped.audit.write_bytes(b"".join(lines[:9]))  # the last event and the final checkpoint go
        code, out = verify(capsys, "--key", stopped.public, stopped.audit)
        assert code == 0, out
        assert "1 event after the last checkpoint" in out
        code, out = verify(capsys, "--key", stopped.public, "--complete", stopped.audit)
        assert code == 1
        assert out.splitlines()[0].startswith(
            f"{stopped.audit}:9: incomplete: the chain ends without its final checkpoint, 1 event"
        )

    async def test_a_rewritten_and_re_signed_chain_is_a_forged_checkpoint(
        self, stopped: Files, capsys: pytest.CaptureFixture[str]
    ) -> None:
        # Edit event 2, then recompute every hash after it and re-sign every checkpoint with
        # another key: the chain is intact, only the signatures tell.
        written = events(stopped.audit)
        written[1]["outcome"] = "denied"
        relink(stopped.audit, written, Signer(Ed25519PrivateKey.generate(), EVERY))
        code, out = verify(capsys, stopped.audit)
        assert code == 0, out  # without a key the rewrite cannot be told
        code, out = verify(capsys, "--key", stopped.public, stopped.audit)
        assert code == 1
        assert out.splitlines()[0] == (
            f"{stopped.audit}:4: forged checkpoint: its signature does not verify"
        ), out

    async def test_checkpoints_dropped_and_the_chain_recomputed_is_unverified_with_a_key(
        self, stopped: Files, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Issue 43 item 4: every checkpoint dropped, an event edited, the chain recomputed.
        Intact as a chain, so only the signatures can tell: with the key it is unverified."""
        jwks = stopped.audit.with_name("jwks.json")
        jwks.write_text(json.dumps(stopped.jwks))
        written = [event for event in events(stopped.audit) if not is_checkpoint(event)]
        written[1]["outcome"] = "denied"
        relink(stopped.audit, written)
        code, out = verify(capsys, stopped.audit)
        assert code == 0, out  # the chain itself is intact
        code, out = verify(capsys, "--jwks", jwks, stopped.audit)
        assert code == 1, out
        assert out.splitlines()[0] == (
            f"{stopped.audit}:1: unverified: no signature covers seq 1-8: the chain has no "
            "checkpoint"
        ), out
        assert (
            "0 checkpoints, 8 events after the last checkpoint, no signature covers seq 1-8" in out
        )
        assert out.splitlines()[-1].startswith(
            "1 chain, 8 events: UNVERIFIED (1 chain not covered by signatures)"
        ), out

    async def test_the_later_checkpoints_dropped_outrun_the_declared_cadence(
        self, stopped: Files, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """The first (genuine) checkpoint kept, the later ones dropped, an event after it
        edited and the chain recomputed: more events follow the last signature than the
        checkpoints' cadence (every 3) ever leaves unsigned."""
        written = events(stopped.audit)
        assert [e.get("every") for e in written if is_checkpoint(e)] == [EVERY] * 3
        kept = [e for e in written if not is_checkpoint(e) or e["seq"] == EVERY + 1]
        kept[5]["outcome"] = "denied"
        relink(stopped.audit, kept)
        jwks = stopped.audit.with_name("jwks.json")
        jwks.write_text(json.dumps(stopped.jwks))
        code, out = verify(capsys, "--jwks", jwks, stopped.audit)
        assert code == 1, out
        assert out.splitlines()[0] == (
            f"{stopped.audit}:5: unverified: no signature covers seq 5-9: 5 events follow the "
            f"last checkpoint ({stopped.audit}:4), more than its cadence leaves unsigned "
            "(every 3): checkpoints dropped?"
        ), out
        assert "1 checkpoint signature verified" in out
        # The same file cut to the open tail a live file may have (3 events): not refused, and
        # the events no signature covers are named.
        stopped.audit.write_bytes(b"".join(stopped.audit.read_bytes().splitlines(True)[:7]))
        code, out = verify(capsys, "--jwks", jwks, stopped.audit)
        assert code == 0, out
        assert "(every 3), 3 events after the last checkpoint, no signature covers seq 5-7" in out

    async def test_events_after_the_final_checkpoint_are_unverified(
        self, stopped: Files, capsys: pytest.CaptureFixture[str]
    ) -> None:
        written = events(stopped.audit)
        extra = dict(written[0])
        relink(stopped.audit, [*written, extra])
        code, out = verify(capsys, "--key", stopped.public, stopped.audit)
        assert code == 1, out  # the signatures verify (the chain before them is untouched)
        assert out.splitlines()[0] == (
            f"{stopped.audit}:12: unverified: no signature covers seq 12: they follow the "
            f"final checkpoint ({stopped.audit}:11)"
        ), out

    async def test_another_key_is_an_unknown_key_and_a_bad_key_file_is_exit_2(
        self, stopped: Files, capsys: pytest.CaptureFixture[str], tmp_path: Path
    ) -> None:
        _, other, _ = write_key(tmp_path, "other")
        code, out = verify(capsys, "--key", other, stopped.audit)
        assert code == 1
        assert out.splitlines()[0].startswith(
            f"{stopped.audit}:4: checkpoint signed by an unknown key"
        )
        (tmp_path / "junk.pem").write_text("not a key")
        assert verify(capsys, "--key", tmp_path / "junk.pem", stopped.audit)[0] == 2
        assert verify(capsys, "--key", tmp_path / "absent.pem", stopped.audit)[0] == 2


async def test_sigterm_writes_the_final_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real ``mcp-gateway serve`` process with the stdout sink, stopped by SIGTERM."""
    private, public, _ = write_key(tmp_path)
    overrides = {"audit": {"checkpoint": {"key": {"file": private.name}, "every": 2}}}
    async with replica_stack(tmp_path, None, replicas=1, overrides=overrides) as stack:
        (replica,) = stack.replicas
        token = stack.mint()
        for index in range(3):
            status, payload, _ = await stack.call(replica, token, "echo", text=str(index))
            assert status == 200, payload
        assert replica.stop() == 0
    code, out = verify(capsys, "--key", public, "--complete", replica.log_path)
    assert code == 0, out
    assert "closed by its final checkpoint" in out
    assert "2 checkpoint signatures verified" in out
