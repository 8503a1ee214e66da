"""``mcp-gateway revoke``: the client of ``POST /admin/revoke`` (``gateway/app/admin.py``).

The token is read from a file or standard input, never from the command line (process lists
show arguments), and turned into its revocation key here
(:func:`gateway.state.revocation_key.revocation_target`: what the issuer signed, the same for
every spelling of the token): only that key, and a JWT's ``exp`` and ``iss`` (so the gateway
keeps the revocation until the token expires), cross the network. Where to send it and
the admin credential come from the options, ``$MCP_GATEWAY_ADMIN_TOKEN``, or the configuration
file (``ops_listen`` and ``admin.token``, the only secret of the file it reads), so inside a pod
``mcp-gateway revoke --config /etc/mcp-gateway/config/gateway.yaml --token-file - < token``
needs nothing else. Exit 0 when every replica the store reaches refuses the token now, 1
otherwise (the answer says why), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, Final

from gateway.app.admin import REVOKE_PATH
from gateway.commands.admin_api import AdminCallFailed, add_admin_options, call_admin
from gateway.commands.options import Subparsers, read_token_file
from gateway.state.revocation_key import revocation_target

__all__ = ["register"]

_SHA256: Final = re.compile(r"[0-9a-fA-F]{64}")


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "revoke",
        help="revoke a token on every replica (POST /admin/revoke on the ops listener)",
        description="Make every replica refuse a token, in every spelling, now (its revocation "
        "key is sent, never the token). The gateway refuses it for admin.revocation_ttl_s, and a "
        "JWT until its exp; revoke it at the issuer too.",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--token-file", metavar="PATH", help="file holding the token ('-': stdin)")
    which.add_argument(
        "--key", metavar="HEX", help="the revocation key (64 hex digits, as the audit trail has it)"
    )
    add_admin_options(parser)
    parser.set_defaults(handler=_cmd_revoke)


def _fail(message: str, code: int = 1) -> int:
    print(f"mcp-gateway revoke: {message}", file=sys.stderr)
    return code


def _body(args: argparse.Namespace) -> dict[str, Any] | None:
    """What ``POST /admin/revoke`` gets: the revocation key, and a JWT's ``exp`` and ``iss``."""
    if args.key is not None:
        value = str(args.key).strip()
        return {"revocation_key": value.lower()} if _SHA256.fullmatch(value) else None
    token = read_token_file(args.token_file)
    if not token:
        return None
    target = revocation_target(token)
    body: dict[str, Any] = {"revocation_key": target.key.hex()}
    if target.expires_at is not None:
        body["exp"] = target.expires_at
    if target.issuer is not None:
        body["iss"] = target.issuer
    return body


def _cmd_revoke(args: argparse.Namespace) -> int:
    try:
        body = _body(args)
    except OSError as exc:
        return _fail(f"cannot read the token: {exc.strerror}", 2)
    if body is None:
        return _fail("no token given (empty input), or --key is not 64 hex digits", 2)
    try:
        url, status, reply = call_admin(args, REVOKE_PATH, body, user_agent="mcp-gateway-revoke")
    except AdminCallFailed as exc:
        return _fail(str(exc), exc.code)
    if status == 200:
        print(
            f"revoked ({reply.get('revoked')}) until {reply.get('until')}: "
            f"token_fp {reply.get('token_fp')}"
        )
        return 0
    if status == 503 and reply.get("revoked") == "this_replica_only":
        return _fail("revoked on the replica that answered only: Redis did not take it; retry")
    detail = reply.get("error_description") or reply.get("error") or "no details"
    return _fail(f"{url} answered {status}: {detail}")
