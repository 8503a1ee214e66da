"""``mcp-gateway audit verify FILE...``: check the audit files' hash chains offline
(:mod:`gateway.observability.audit_verify`).

Exit 0 when every chain is intact, 1 with each chain's first break as ``FILE:LINE: reason``,
2 for usage errors or a file that cannot be read.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gateway.observability.audit_verify import Report, read_files, verify_files

__all__ = ["register"]


def register(subparsers: Any) -> None:
    audit = subparsers.add_parser(
        "audit",
        help="work with audit files (audit verify)",
        description="Work with the audit trail's files.",
    )
    commands = audit.add_subparsers(dest="audit_command", metavar="<command>", required=True)
    verify = commands.add_parser(
        "verify",
        help="check the hash chains of audit files",
        description="Check the hash chain of every replica's events in FILE... (the rotated "
        "files of one sink, several replicas' files, or a captured stdout, together). Exit 0 "
        "when every chain is intact, 1 with the first break of each broken chain as "
        "FILE:LINE: reason, 2 for usage errors or an unreadable file.",
    )
    verify.add_argument("files", nargs="+", metavar="FILE", help="audit files (any order)")
    verify.set_defaults(handler=_cmd_verify)


def _cmd_verify(args: argparse.Namespace) -> int:
    try:
        files = read_files(args.files)
    except OSError as exc:
        print(
            f"mcp-gateway audit verify: cannot read {exc.filename}: {exc.strerror}", file=sys.stderr
        )
        return 2
    report = verify_files(files)
    _print(report)
    return 0 if report.intact else 1


def _print(report: Report) -> None:
    for broken in report.breaks:
        print(broken)
    for note in report.notes:
        print(f"note: {note}")
    for chain in report.chains:
        print(
            f"chain {chain.chain}: {chain.events} event{'s' if chain.events != 1 else ''}, "
            f"seq {chain.first_seq}-{chain.last_seq} ({', '.join(chain.files)})"
        )
    skipped = (
        f"; {report.skipped} other line{'s' if report.skipped != 1 else ''} skipped"
        if report.skipped
        else ""
    )
    verdict = (
        "intact"
        if report.intact
        else f"BROKEN ({len(report.breaks)} break" + ("s)" if len(report.breaks) != 1 else ")")
    )
    print(
        f"{len(report.chains)} chain{'s' if len(report.chains) != 1 else ''}, "
        f"{report.events} events: {verdict}{skipped}; signatures not checked (no key given)"
    )
