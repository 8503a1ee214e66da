"""Audit files read for verification (:mod:`.audit_verify`): each file's bytes split into its
audit events (a line that is a JSON object with ``"log": "audit"``; other lines are skipped and
counted, damaged ones are breaks), a checkpoint's signature checked as it is read; and the
report the verification fills in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from gateway.observability.audit_chain import CHECKPOINT_EVENT, digest, signed_bytes

__all__ = ["Break", "ChainReport", "Event", "Keys", "Report", "read_events", "seq_span"]

_MARK: Final = b'"log":"audit"'


@dataclass(frozen=True, slots=True)
class Event:
    path: str
    line: int
    chain: str
    seq: int
    prev: str
    digest: str
    record: dict[str, Any]
    signature: str | None = None
    """A checkpoint's signature check: None (not a checkpoint, or no keys given), ``ok``, or
    why it failed."""

    @property
    def checkpoint(self) -> bool:
        return self.record.get("event") == CHECKPOINT_EVENT

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True)
class Break:
    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass(slots=True)
class ChainReport:
    chain: str
    events: int = 0
    first_seq: int = 0
    last_seq: int = 0
    files: list[str] = field(default_factory=list)
    checkpoints: int = 0
    after_checkpoint: int = 0
    """Events after the last checkpoint (all of them when there is none)."""
    closed: bool = False
    """The chain ends with a ``final`` checkpoint."""
    every: int | None = None
    """The checkpoint cadence the chain's checkpoints declare (None: none, or not checked)."""
    uncovered: tuple[int, int] | None = None
    """With keys: the ``seq`` range no checkpoint signature covers (None: every event)."""


def seq_span(first: int, last: int) -> str:
    """``N`` or ``N-M``: a range of ``seq``."""
    return str(first) if first == last else f"{first}-{last}"


@dataclass(slots=True)
class Report:
    events: int = 0
    skipped: int = 0
    """Lines that are not audit events (other JSON lines, blank or foreign text)."""
    chains: list[ChainReport] = field(default_factory=list)
    breaks: list[Break] = field(default_factory=list)
    unverified: list[Break] = field(default_factory=list)
    """With keys: per chain whose events are not covered by signatures at the declared cadence,
    where the uncovered events start and why (``audit_verify._coverage``)."""
    notes: list[str] = field(default_factory=list)
    signatures: int = 0
    """Checkpoint signatures verified."""

    @property
    def intact(self) -> bool:
        """No chain is broken."""
        return not self.breaks

    @property
    def verified(self) -> bool:
        """No chain is broken, and (with keys) every chain is covered by signatures."""
        return not self.breaks and not self.unverified


def _loads(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        # orjson refuses an escaped lone surrogate, which the writer may emit; json takes it.
        return json.loads(line.decode("utf-8", "surrogateescape"))


Keys = dict[str, Ed25519PublicKey]


def _check_signature(line: bytes, record: dict[str, Any], keys: Keys) -> str:
    key = keys.get(str(record.get("kid")))
    if key is None:
        return f"checkpoint signed by an unknown key (kid {record.get('kid')!r})"
    parts = signed_bytes(line)
    if parts is None:
        return "bad checkpoint: no signature"
    try:
        key.verify(parts[1], parts[0])
    except InvalidSignature:
        return "forged checkpoint: its signature does not verify"
    return "ok"


def read_events(path: str, data: bytes, report: Report, keys: Keys | None = None) -> list[Event]:
    """The audit events of one file's bytes; damaged lines become breaks in ``report``."""
    lines = data.split(b"\n")
    unterminated = lines[-1] != b""
    if not unterminated:
        lines.pop()
    events: list[Event] = []
    for number, line in enumerate(lines, 1):
        last = number == len(lines)
        try:
            record = _loads(line)
        except ValueError:
            if last and unterminated and line:
                report.breaks.append(
                    Break(path, number, "line cut in half (the file ends inside an event)")
                )
            elif _MARK in line:
                report.breaks.append(Break(path, number, "damaged event: not valid JSON"))
            else:
                report.skipped += 1
            continue
        if not isinstance(record, dict) or record.get("log") != "audit":
            report.skipped += 1
            continue
        chain, seq, prev = record.get("chain"), record.get("seq"), record.get("prev")
        if not (isinstance(chain, str) and type(seq) is int and isinstance(prev, str)):
            report.breaks.append(
                Break(path, number, "audit event without its chain fields (chain, seq, prev)")
            )
            continue
        signature = None
        if keys is not None and record.get("event") == CHECKPOINT_EVENT:
            signature = _check_signature(line, record, keys)
        events.append(Event(path, number, chain, seq, prev, digest(line), record, signature))
    return events
