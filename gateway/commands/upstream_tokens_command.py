"""``mcp-gateway upstream-tokens list|purge``: the operators' view of the per-user upstream
tokens of ``user_oauth`` backends, a client of ``POST /admin/upstream-tokens/*`` on the ops
listener (``gateway/app/admin_upstream.py``; docs/operations.md#per-user-upstream-tokens).

``list`` prints one line per record (backend, issuer, subject, state, server, scope, times;
never a token), of a backend, a person (``--issuer`` and ``--subject``), or all; ``--json``
prints the answer as it came. ``purge`` deletes the records of a backend, a person, or a person
at a backend (one of them is required), on every replica at once. Where the ops listener is and
the admin credential: as ``mcp-gateway revoke``. Exit 0 on success, 1 when the gateway refused
or could not be reached, 2 for usage errors.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from gateway.app.admin_upstream import LIST_PATH, PURGE_PATH
from gateway.commands.admin_api import AdminCallFailed, add_admin_options, call_admin
from gateway.commands.options import Subparsers
from gateway.jsonkit.write import compact

__all__ = ["register"]


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "upstream-tokens",
        help="list or purge people's stored upstream tokens (user_oauth backends)",
        description="The records of the backends that act with each person's own upstream "
        "token: who connected which backend, in which state. Never shows a token.",
    )
    actions = parser.add_subparsers(dest="action", metavar="<action>", required=True)
    for action, text in (
        ("list", "list the records (of a backend, a person, or all)"),
        ("purge", "delete the records of a backend, a person, or a person at a backend"),
    ):
        sub = actions.add_parser(action, help=text, description=text)
        sub.add_argument("--backend", metavar="NAME", help="a user_oauth backend")
        sub.add_argument("--issuer", metavar="URL", help="the person's issuer (with --subject)")
        sub.add_argument("--subject", metavar="SUB", help="the person's subject (with --issuer)")
        if action == "list":
            sub.add_argument("--json", action="store_true", help="print the answer as JSON")
        add_admin_options(sub)
        sub.set_defaults(handler=_cmd)


def _fail(message: str, code: int = 1) -> int:
    print(f"mcp-gateway upstream-tokens: {message}", file=sys.stderr)
    return code


def _when(value: Any) -> str:
    if not isinstance(value, int) or value <= 0:
        return "-"
    return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds")[:-6] + "Z"


def _cmd(args: argparse.Namespace) -> int:
    if (args.issuer is None) != (args.subject is None):
        return _fail("--issuer and --subject go together", 2)
    named = {"backend": args.backend, "issuer": args.issuer, "subject": args.subject}
    body = {key: value for key, value in named.items() if value is not None}
    if args.action == "purge" and not body:
        return _fail("name a --backend, a person (--issuer and --subject), or both", 2)
    path = LIST_PATH if args.action == "list" else PURGE_PATH
    user_agent = "mcp-gateway-upstream-tokens"
    try:
        _, status, reply = call_admin(args, path, body, user_agent=user_agent)
    except AdminCallFailed as exc:
        return _fail(str(exc), exc.code)
    if status == 404:
        return _fail("the gateway has no user_oauth backend (or no admin endpoint)")
    if status != 200:
        return _fail(f"{status}: {reply.get('error_description') or reply.get('error')}")
    if args.action == "purge":
        print(f"purged {reply.get('purged')} record(s)")
        return 0
    if args.json:
        print(compact(reply).decode())
        return 0
    for record in reply.get("records", []):
        print(
            f"{record.get('backend')}\t{record.get('issuer')}\t{record.get('subject')}\t"
            f"{record.get('state')}\tserver={record.get('server')}\tscope={record.get('scope')!r}\t"
            f"connected={_when(record.get('connected_at'))}\t"
            f"refreshed={_when(record.get('refreshed_at'))}"
        )
    return 0
