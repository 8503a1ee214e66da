"""``mcp-gateway audit verify [--key PUBLIC.pem | --jwks FILE_OR_URL] [--complete] FILE...``:
check the audit files' hash chains and checkpoint signatures offline
(:mod:`gateway.observability.audit_verify`).

Exit 0 when every chain is intact (and, given a key, every checkpoint verified and every event
covered by a signature but the open tail a live file's cadence allows), 1 with each chain's
first break as ``FILE:LINE: reason`` or where its unsigned events start as ``FILE:LINE:
unverified: ...``, 2 for usage errors, a file or key that cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, Final

from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key

import gateway
from gateway import b64url
from gateway.commands.options import Subparsers
from gateway.jsonkit.read import loads
from gateway.observability.audit_chain import public_jwk
from gateway.observability.audit_events import seq_span
from gateway.observability.audit_verify import Keys, Report, read_files, verify_files
from gateway.observability.lines import printable
from gateway.outbound.client import Destination, Outbound
from gateway.outbound.failures import OutboundError

__all__ = ["load_jwks", "load_pem_key", "register"]

TIMEOUT_S: Final = 10.0
MAX_JWKS_BYTES: Final = 1_000_000


def register(subparsers: Subparsers) -> None:
    audit = subparsers.add_parser(
        "audit",
        help="work with audit files (audit verify)",
        description="Work with the audit trail's files.",
    )
    commands = audit.add_subparsers(dest="audit_command", metavar="<command>", required=True)
    verify = commands.add_parser(
        "verify",
        help="check the hash chains and checkpoint signatures of audit files",
        description="Check the hash chain of every replica's events in FILE... (the rotated "
        "files of one sink, several replicas' files, or a captured stdout, together) and, with "
        "--key or --jwks, every checkpoint's signature and that signatures cover every event "
        "at the cadence the checkpoints declare (all but the open tail of a live file). Exit 0 "
        "when every chain is intact (and, with a key, verified), 1 with the first break of "
        "each broken chain as FILE:LINE: reason and the first unsigned event of each "
        "unverified one, 2 for usage errors or a file or key that cannot be read.",
    )
    verify.add_argument("files", nargs="+", metavar="FILE", help="audit files (any order)")
    key = verify.add_mutually_exclusive_group()
    key.add_argument("--key", metavar="PUBLIC.pem", help="the checkpoint key's public key (PEM)")
    key.add_argument(
        "--jwks",
        metavar="FILE_OR_URL",
        help="a JWK Set holding the checkpoint key, e.g. the ops listener's "
        "http://HOST:9090/.well-known/jwks.json, or a saved copy",
    )
    verify.add_argument(
        "--complete",
        action="store_true",
        help="the files are a finished archive: each chain must start at seq 1 and end with "
        "its final (shutdown) checkpoint",
    )
    verify.set_defaults(handler=_cmd_verify)


def _fail(message: str) -> int:
    print(f"mcp-gateway audit verify: {message}", file=sys.stderr)
    return 2


def load_pem_key(data: bytes) -> Keys:
    """An Ed25519 public key in PEM (a private key's public half is taken too)."""
    key: Any
    try:
        key = load_pem_public_key(data)
    except ValueError:
        key = load_pem_private_key(data, password=None)
    if isinstance(key, Ed25519PrivateKey):
        key = key.public_key()
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 key")
    return {public_jwk(key)["kid"]: key}


def load_jwks(document: Any) -> Keys:
    """The Ed25519 keys (``kty`` OKP, ``crv`` Ed25519) of a JWK Set, by ``kid``."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWK Set (no keys array)")
    keys: Keys = {}
    for jwk in document["keys"]:
        if isinstance(jwk, dict) and jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
            raw = b64url.decode_canonical(str(jwk.get("x", "")))
            if raw is None:
                raise ValueError(f"JWK {jwk.get('kid')!r}: x is not base64url")
            key = Ed25519PublicKey.from_public_bytes(raw)
            keys[str(jwk.get("kid") or public_jwk(key)["kid"])] = key
    if not keys:
        raise ValueError("the JWK Set holds no Ed25519 key")
    return keys


async def _fetch(url: str) -> bytes:
    outbound = Outbound(user_agent=f"mcp-resource-gateway/{gateway.__version__}")
    outbound.add(Destination("once", connect_timeout_s=3.0))
    try:
        response = await outbound.request(
            "once", "GET", url, timeout_s=TIMEOUT_S, max_body=MAX_JWKS_BYTES
        )
    finally:
        await outbound.close()
    if response.status != 200:
        raise ValueError(f"HTTP {response.status}")
    return response.body


def _keys(args: argparse.Namespace) -> Keys | None:
    if args.key is not None:
        return load_pem_key(Path(args.key).read_bytes())
    if args.jwks is None:
        return None
    source: str = args.jwks
    if source.startswith(("http://", "https://")):
        data = asyncio.run(_fetch(source))
    else:
        data = Path(source).read_bytes()
    return load_jwks(loads(data))


def _cmd_verify(args: argparse.Namespace) -> int:
    try:
        keys = _keys(args)
    except OSError as exc:
        return _fail(f"cannot read {exc.filename or args.key or args.jwks}: {exc.strerror or exc}")
    except (OutboundError, ValueError) as exc:
        return _fail(f"no usable key in {args.key or args.jwks}: {exc}")
    try:
        files = read_files(args.files)
    except OSError as exc:
        return _fail(f"cannot read {exc.filename}: {exc.strerror}")
    report = verify_files(files, keys, complete=args.complete)
    _print(report, keys is not None)
    return 0 if report.verified else 1


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _print(report: Report, signed: bool) -> None:
    """The report on stdout, every line through :func:`printable`: a chain id, a ``kid`` or a
    path comes from the files, whose writer may be the one being caught."""
    for line in _report_lines(report, signed):
        print(printable(line))


def _report_lines(report: Report, signed: bool) -> list[str]:
    lines = [str(item) for item in (*report.breaks, *report.unverified)]
    lines.extend(f"note: {note}" for note in report.notes)
    for chain in report.chains:
        state = (
            "closed by its final checkpoint"
            if chain.closed
            else (f"{_plural(chain.after_checkpoint, 'event')} after the last checkpoint")
        )
        cadence = f" (every {chain.every})" if chain.every is not None else ""
        unsigned_span = ""
        if chain.uncovered is not None:
            unsigned_span = f", no signature covers seq {seq_span(*chain.uncovered)}"
        lines.append(
            f"chain {chain.chain}: {_plural(chain.events, 'event')}, seq {chain.first_seq}-"
            f"{chain.last_seq}, {_plural(chain.checkpoints, 'checkpoint')}{cadence}, {state}"
            f"{unsigned_span} ({', '.join(chain.files)})"
        )
    skipped = f"; {_plural(report.skipped, 'other line')} skipped" if report.skipped else ""
    verdicts = []
    if report.breaks:
        verdicts.append(f"BROKEN ({_plural(len(report.breaks), 'break')})")
    if report.unverified:
        count = _plural(len(report.unverified), "chain")
        verdicts.append(f"UNVERIFIED ({count} not covered by signatures)")
    verdict = ", ".join(verdicts) or "intact"
    signatures = (
        f"{_plural(report.signatures, 'checkpoint signature')} verified"
        if signed
        else "signatures not checked (no --key or --jwks given)"
    )
    lines.append(
        f"{_plural(len(report.chains), 'chain')}, {report.events} events: {verdict}{skipped}; "
        f"{signatures}"
    )
    return lines
