"""Offline verification of audit files: every chain intact, or the first break of each chain as
``FILE:LINE: reason`` (``mcp-gateway audit verify``, :mod:`gateway.commands.audit_command`).

Files are read as bytes and split on ``\\n`` (:mod:`.audit_events`); a line is an audit event
when it is a JSON object with ``"log": "audit"`` (other lines, e.g. the application log beside
the stdout sink, are skipped and counted). Events are grouped by ``chain``; a chain's events
in one file are one segment, in line order, and the segments of a chain (rotated files, given
in any order) are put in order by their lowest ``seq``. Then each chain is walked: ``seq``
must count up by one and ``prev`` must be the
:func:`~gateway.observability.audit_chain.digest` of the event before. Which line is to blame
for a broken link is decided from its neighbours (a single edited event breaks the link after
it; one whose ``prev`` was edited breaks both of its links).

Given public keys (``kid`` -> key), every ``audit_checkpoint`` event's signature is checked
(:func:`~gateway.observability.audit_chain.signed_bytes`), and the chain must be covered by
signatures at the cadence its checkpoints declare (:func:`_coverage`): a checkpoint's signature
covers every event before it, so what no signature covers is the chain's tail after its last
checkpoint. That tail may be at most the checkpoint's ``every`` events (the open tail of a live
file: its next checkpoint is not due yet); a longer one, one after the ``final`` checkpoint, or
a chain with no checkpoint at all is *unverified* (someone without the key dropped checkpoints
and recomputed the chain: the hashes alone cannot tell). How many events follow a chain's last
checkpoint is reported; with ``complete`` a chain that does not end with a ``final``
checkpoint, or does not start at ``seq`` 1, is a break (an archived file cut at an event
boundary).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path

from gateway.observability.audit_chain import GENESIS
from gateway.observability.audit_events import (
    Break,
    ChainReport,
    Event,
    Keys,
    Report,
    read_events,
    seq_span,
)

__all__ = [
    "Break",
    "ChainReport",
    "Event",
    "Keys",
    "Report",
    "read_events",
    "read_files",
    "verify_files",
]


def _walk(events: Sequence[Event], report: Report) -> Break | None:
    """The first break of one chain's events (in order), or None."""
    by_seq = {event.seq for event in events}
    first = events[0]
    if first.seq == 1 and first.prev != GENESIS:
        return Break(first.path, first.line, "edited event: seq 1 does not start the chain")
    if first.seq != 1:
        report.notes.append(
            f"chain {first.chain} starts at seq {first.seq} ({first.where}): the "
            "events before it are not in the files given (rotated away?)"
        )
    link_break = _first_link_break(events)
    for event in events:
        broken = _checkpoint_break(event)
        if broken is not None and event.seq <= link_break:
            return broken
    previous = first
    for index in range(1, len(events)):
        event = events[index]
        following = events[index + 1] if index + 1 < len(events) else None
        expected = previous.seq + 1
        if event.seq == expected and event.prev == previous.digest:
            previous = event
            continue
        if event.seq == expected:
            if (
                following is not None
                and following.seq == event.seq
                and (following.prev == previous.digest)
            ):
                return Break(event.path, event.line, f"inserted event: a second seq {event.seq}")
            if following is not None and following.prev != event.digest:
                # Both of its links are broken: this event (its prev among them) was edited.
                return Break(event.path, event.line, f"edited event (seq {event.seq})")
            return Break(
                previous.path,
                previous.line,
                f"edited event (seq {previous.seq}): its "
                f"SHA-256 is not the prev of seq {event.seq} ({event.where})",
            )
        if event.seq > expected:
            missing = [seq for seq in range(expected, event.seq) if seq in by_seq]
            if missing:
                return Break(
                    event.path,
                    event.line,
                    f"reordered event: seq {event.seq} comes before seq {missing[0]}",
                )
            gap = (
                f"seq {expected}"
                if event.seq == expected + 1
                else f"seq {expected} to {event.seq - 1}"
            )
            return Break(
                event.path, event.line, f"deleted event: {gap} missing before seq {event.seq}"
            )
        if event.seq == previous.seq:
            if event.digest == previous.digest:
                return Break(event.path, event.line, f"inserted event: seq {event.seq} repeated")
            if following is not None and following.prev == event.digest:
                return Break(
                    previous.path,
                    previous.line,
                    f"inserted event: a second seq "
                    f"{event.seq} ({event.where} is the one the chain goes on from)",
                )
            return Break(event.path, event.line, f"inserted event: a second seq {event.seq}")
        return Break(
            event.path,
            event.line,
            f"reordered or inserted event: seq {event.seq} after seq {previous.seq}",
        )
    return None


def _checkpoint_break(event: Event) -> Break | None:
    if not event.checkpoint:
        return None
    if event.signature not in (None, "ok"):
        return Break(event.path, event.line, str(event.signature))
    if event.record.get("events") != event.seq - 1:
        return Break(
            event.path,
            event.line,
            f"bad checkpoint: it counts "
            f"{event.record.get('events')!r} events before it, the chain {event.seq - 1}",
        )
    return None


def _first_link_break(events: Sequence[Event]) -> int:
    """The ``seq`` of the first event whose link to the one before is broken (or beyond the
    last): a checkpoint break after it is a consequence, reported as the link break."""
    for before, event in itertools.pairwise(events):
        if event.seq != before.seq + 1 or event.prev != before.digest:
            return before.seq
    return events[-1].seq


def _close(
    chain: ChainReport, events: Sequence[Event], complete: bool, signed: bool, report: Report
) -> Break | None:
    """Checkpoint coverage of an unbroken chain (with keys: an unverified one is added to
    ``report``); with ``complete``, a break unless it is whole."""
    checkpoints = [event for event in events if event.checkpoint]
    chain.checkpoints = len(checkpoints)
    report.signatures += sum(1 for event in checkpoints if event.signature == "ok")
    last = events[-1]
    chain.closed = last.checkpoint and last.record.get("final") is True
    chain.after_checkpoint = last.seq - checkpoints[-1].seq if checkpoints else len(events)
    if signed:
        unverified = _coverage(chain, events, checkpoints)
        if unverified is not None:
            report.unverified.append(unverified)
    if not complete:
        return None
    if events[0].seq != 1:
        return Break(
            events[0].path,
            events[0].line,
            f"incomplete: the chain starts at seq {events[0].seq} (--complete)",
        )
    if not chain.closed:
        return Break(
            last.path,
            last.line,
            f"incomplete: the chain ends without its final "
            f"checkpoint, {chain.after_checkpoint} events after the last checkpoint "
            "(truncated, or the gateway did not stop cleanly) (--complete)",
        )
    return None


def _coverage(
    chain: ChainReport, events: Sequence[Event], checkpoints: Sequence[Event]
) -> Break | None:
    """Where an unbroken chain's events stop being covered by a checkpoint signature, when more
    of them follow than the declared cadence leaves open; ``chain.uncovered`` is that range."""
    first, last = events[0], events[-1]
    if not checkpoints:
        chain.uncovered = (first.seq, last.seq)
        return Break(
            first.path,
            first.line,
            "unverified: no signature covers seq "
            f"{seq_span(first.seq, last.seq)}: the chain has no checkpoint",
        )
    latest = checkpoints[-1]
    chain.every = _cadence(events, checkpoints)
    if latest is last:
        return None
    tail = events[events.index(latest) + 1]
    chain.uncovered = (tail.seq, last.seq)
    after = last.seq - latest.seq
    if latest.record.get("final") is True:
        reason = f"they follow the final checkpoint ({latest.where})"
    elif chain.every is None:
        reason = (
            f"they follow the last checkpoint ({latest.where}), whose cadence the "
            "checkpoints do not declare"
        )
    elif after > chain.every:
        reason = (
            f"{after} events follow the last checkpoint ({latest.where}), more than its "
            f"cadence leaves unsigned (every {chain.every}): checkpoints dropped?"
        )
    else:
        return None  # the open tail of a live file: its next checkpoint is not due yet
    span = seq_span(tail.seq, last.seq)
    return Break(tail.path, tail.line, f"unverified: no signature covers seq {span}: {reason}")


def _cadence(events: Sequence[Event], checkpoints: Sequence[Event]) -> int | None:
    """The ``every`` the last checkpoint declares (signed with it). Checkpoints written before
    they declared it: read from where the signed checkpoints stand (a non-final one follows
    exactly ``every`` events after the checkpoint before it, or after the chain's start)."""
    declared = checkpoints[-1].record.get("every")
    if type(declared) is int and declared > 0:
        return declared
    before = 0 if events[0].seq == 1 else None
    for checkpoint in checkpoints:
        if before is not None and checkpoint.record.get("final") is not True:
            return checkpoint.seq - before - 1
        before = checkpoint.seq
    return None


def verify_files(
    files: Iterable[tuple[str, bytes]], keys: Keys | None = None, *, complete: bool = False
) -> Report:
    """Every chain found in ``files`` (name, bytes) checked together; ``keys``: checkpoint
    public keys by ``kid`` (None: signatures are not checked)."""
    report = Report()
    segments: dict[str, list[list[Event]]] = {}
    for path, data in files:
        per_chain: dict[str, list[Event]] = {}
        for event in read_events(path, data, report, keys):
            per_chain.setdefault(event.chain, []).append(event)
        for chain, events in per_chain.items():
            segments.setdefault(chain, []).append(events)
    for chain, parts in segments.items():
        parts.sort(key=lambda part: min(event.seq for event in part))
        events = [event for part in parts for event in part]
        report.events += len(events)
        report.chains.append(
            ChainReport(
                chain,
                events=len(events),
                first_seq=min(event.seq for event in events),
                last_seq=max(event.seq for event in events),
                files=list(dict.fromkeys(part[0].path for part in parts)),
            )
        )
        broken = _walk(events, report)
        if broken is None:
            broken = _close(report.chains[-1], events, complete, keys is not None, report)
        if broken is not None:
            report.breaks.append(broken)
    report.breaks.sort(key=lambda item: (item.path, item.line))
    report.unverified.sort(key=lambda item: (item.path, item.line))
    return report


def read_files(paths: Sequence[str]) -> list[tuple[str, bytes]]:
    """The files' bytes; OSError for one that cannot be read."""
    return [(path, Path(path).read_bytes()) for path in paths]
