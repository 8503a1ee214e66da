"""``mcp-gateway catalog pin | diff | approve``: the pinned catalog's review workflow.

Each command fetches every configured backend's tools, prompts and resource templates once, as
the gateway does (its service credential, its deadlines; no background refresh, no listen
stream), and compares them with the lock file (:mod:`gateway.backend.catalog.lock_file`):

* ``pin [--output FILE]``: write the lock from what the backends offer now (all of it);
* ``diff [--lock FILE]``: print a unified diff per item (every member: text line by line,
  structures as indented JSON), lock against live; exit 0 when they agree, 1 when they differ;
* ``approve [--lock FILE] [NAME...]``: take the live definitions into the lock, all of them or
  the named items (``NAME``, or ``KIND:NAME`` with kind ``tool``, ``prompt`` or ``template``;
  a removed item is dropped from the lock); the file is then a reviewable change to commit.

A lock of an older format (``version: 1``) is read with a note on stderr
(:data:`~gateway.backend.catalog.lock_file.OUTDATED`); ``pin`` and ``approve`` write the current
one.

Of the configuration's secret references only the backends' are read (their credentials):
reviewing needs no issuer secret, admin token or Redis URL.

Exit codes: 0 success (``diff``: no difference), 1 ``diff``: differences, 2 usage errors, an
invalid configuration or lock file (its problems as ``file:line:col: message``), a backend that
could not be fetched, a ``NAME`` that matches nothing. Nothing is written on an error: a lock
is never made from half a catalog.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from gateway.backend.catalog.lock_file import (
    EMPTY_LOCK,
    FORMAT_VERSION,
    OUTDATED,
    Lock,
    load_lock,
    write_lock,
)
from gateway.backend.catalog.pinning import KINDS, Difference, Item, compare, render_diff
from gateway.commands.options import CONFIG_ENV, Subparsers, add_config_option
from gateway.config import Config, load_config
from gateway.errors import ConfigError
from gateway.observability.logging import configure
from gateway.wiring.catalog_fetch import fetch_catalogs

__all__ = ["DEFAULT_LOCK", "Live", "check_lock", "fetch_live", "register"]

DEFAULT_LOCK: Final = "catalog.lock.yaml"
BACKEND_SECTIONS: Final = ("backend", "backends")
"""The sections whose secret references the commands read (the service credentials)."""


class _Failed(Exception):
    """A reason to stop with exit code 2 (printed as is)."""


def register(subparsers: Subparsers) -> None:
    catalog = subparsers.add_parser(
        "catalog",
        help="pin, diff and approve the backends' tool definitions (catalog lock)",
        description="The pinned catalog's review workflow: pin, commit, serve, diff, approve "
        "(docs/operations.md, 'Pinned catalog').",
    )
    commands = catalog.add_subparsers(dest="catalog_command", metavar="<command>", required=True)
    pin = commands.add_parser(
        "pin",
        help="write the lock file from what every backend offers now",
        description="Fetch every backend's tools, prompts and resource templates and write "
        "them, sorted, with the SHA-256 of each definition, to the lock file. Exit 0 when "
        "written, 2 when a backend could not be fetched (nothing is written).",
    )
    pin.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help=f"where to write (default: catalog.lock, else {DEFAULT_LOCK})",
    )
    diff = commands.add_parser(
        "diff",
        help="show what differs between the backends and the lock",
        description="Print a unified diff, lock (---) against live (+++), of every item that "
        "changed, is new or was removed. Exit 0 when none differs, 1 when some do, 2 on errors.",
    )
    approve = commands.add_parser(
        "approve",
        help="take the live definitions into the lock (all, or the named items)",
        description="Update the lock from the live definitions: every difference, or the "
        "items named (NAME, or KIND:NAME with KIND tool, prompt or template). Exit 0 when "
        "done (or nothing to approve), 2 on errors or a NAME that matches nothing.",
    )
    approve.add_argument("names", nargs="*", metavar="NAME", help="items to approve")
    for command in (pin, diff, approve):
        add_config_option(command)
        command.set_defaults(handler=_cmd_catalog)
    for command in (diff, approve):
        command.add_argument("--lock", metavar="FILE", help="the lock file (default: catalog.lock)")


@dataclass(frozen=True, slots=True)
class Live:
    """What the backends offer now, compared with a lock."""

    items: tuple[Item, ...]
    differences: tuple[Difference, ...]


async def fetch_live(config: Config, lock: Lock) -> Live:
    """Fetch every backend once (:func:`gateway.wiring.catalog_fetch.fetch_catalogs`) and compare
    with ``lock``; raises :class:`_Failed` naming each backend whose tools (or prompts and
    templates) could not be listed, :class:`ConfigError` for an invalid policy."""
    fetched = await fetch_catalogs(config, lock, lock_path(config, None))
    if fetched.failed:
        raise _Failed(
            f"could not fetch the catalog of backend {', '.join(fetched.failed)} (see the log "
            "above); nothing was written"
        )
    return Live(fetched.items, compare(fetched.items, lock.items.values()))


def check_lock(config: Config | None) -> list[str]:
    """For ``mcp-gateway check``: the configured lock file's problems, as ``serve`` would refuse
    it (``file:line:col: key: message``)."""
    if config is None or config.catalog is None:
        return []
    path = config.catalog.lock
    if not path.is_file():
        missing = "the lock file does not exist (mcp-gateway catalog pin writes it)"
        return [f"{path}: catalog.lock: {missing}"]
    try:
        load_lock(path)
    except ConfigError as exc:
        return list(exc.problems)
    return []


def lock_path(config: Config, given: str | None) -> Path:
    if given is not None:
        return Path(given)
    if config.catalog is not None:
        return config.catalog.lock
    return Path(DEFAULT_LOCK)


def _cmd_catalog(args: argparse.Namespace) -> int:
    # The diff is the output: log lines go to stderr, warnings only unless asked for more.
    configure(
        getattr(args, "log_format", "console"),
        getattr(args, "log_level", "warning"),
        stream=sys.stderr,
    )
    command = f"mcp-gateway catalog {args.catalog_command}"
    try:
        if not args.config:
            raise _Failed(f"no configuration: pass --config PATH or set {CONFIG_ENV}")
        # The backends' credentials only: nothing here calls an issuer, serves or stores state,
        # so a workstation without the issuer's secret (or admin, Redis...) can review.
        config = load_config(Path(args.config), resolve_secrets=BACKEND_SECTIONS)
        if args.catalog_command == "pin":
            return _pin(config, args.output)
        if args.catalog_command == "diff":
            return _diff(config, args.lock)
        return _approve(config, args.lock, args.names)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"{command}: {len(exc.problems)} problem(s)", file=sys.stderr)
        return 2
    except _Failed as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2


def _pin(config: Config, output: str | None) -> int:
    path = lock_path(config, output)
    live = asyncio.run(fetch_live(config, EMPTY_LOCK))
    write_lock(path, live.items)
    print(f"{path}: pinned {_count(live.items)} of {len(config.backends)} backend(s)")
    return 0


def _load(path: Path) -> Lock:
    lock = load_lock(path)
    if lock.format != FORMAT_VERSION:
        print(f"{path}: {OUTDATED}", file=sys.stderr)
    return lock


def _diff(config: Config, given: str | None) -> int:
    path = lock_path(config, given)
    live = asyncio.run(fetch_live(config, _load(path)))
    sys.stdout.write(render_diff(live.differences))
    if not live.differences:
        print(f"{path}: the backends offer exactly what the lock pins", file=sys.stderr)
        return 0
    print(f"{path}: {_summary(live.differences)}", file=sys.stderr)
    return 1


def _approve(config: Config, given: str | None, names: Sequence[str]) -> int:
    path = lock_path(config, given)
    lock = _load(path)
    live = asyncio.run(fetch_live(config, lock))
    chosen = list(live.differences)
    if names:
        chosen = []
        for name in names:
            kind, _, bare = (
                name.partition(":") if name.split(":", 1)[0] in KINDS else ("", "", name)
            )
            matched = [d for d in live.differences if _matches(d, kind, bare)]
            if not matched and not any(_matches_item(i, kind, bare) for i in live.items):
                raise _Failed(f"{name!r}: no such tool, prompt or template (nothing was written)")
            chosen.extend(d for d in matched if d not in chosen)
    if not chosen:
        if lock.format != FORMAT_VERSION:  # the same items, in the current format
            write_lock(path, lock.items.values())
            print(f"{path}: nothing to approve; rewritten as lock version {FORMAT_VERSION}")
            return 0
        print(f"{path}: nothing to approve")
        return 0
    items = dict(lock.items)
    for difference in chosen:
        if difference.live is None:
            items.pop(difference.key, None)
        else:
            items[difference.key] = difference.live
        kind, backend, name = difference.key
        print(f"approved {kind} {name} (backend {backend}): {difference.change}")
    write_lock(path, items.values())
    print(f"{path}: {len(chosen)} approved, {len(live.differences) - len(chosen)} still differ")
    return 0


def _matches(difference: Difference, kind: str, name: str) -> bool:
    return _matches_item(difference.item, kind, name)


def _matches_item(item: Item, kind: str, name: str) -> bool:
    return item.name == name and (not kind or item.kind == kind)


def _count(items: Sequence[Item]) -> str:
    counts = {kind: sum(1 for item in items if item.kind == kind) for kind in KINDS}
    return ", ".join(f"{count} {kind}{'s' if count != 1 else ''}" for kind, count in counts.items())


def _summary(differences: Sequence[Difference]) -> str:
    counts: dict[str, int] = {}
    for difference in differences:
        counts[difference.change] = counts.get(difference.change, 0) + 1
    return ", ".join(f"{count} {change}" for change, count in sorted(counts.items()))
