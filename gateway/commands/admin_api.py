"""What the clients of the admin API on the ops listener share (``mcp-gateway revoke``,
``mcp-gateway upstream-tokens``; ``gateway/app/admin.py``): where the listener is, the admin
credential, and one POST to it."""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import Any, Final

from gateway.commands.options import add_config_option
from gateway.config.loader import load_ops_access
from gateway.errors import ConfigError
from gateway.outbound.client import post_json_once
from gateway.outbound.failures import OutboundError

__all__ = ["ADMIN_TOKEN_ENV", "AdminCallFailed", "add_admin_options", "call_admin"]

ADMIN_TOKEN_ENV: Final = "MCP_GATEWAY_ADMIN_TOKEN"  # noqa: S105 - a variable name
TIMEOUT_S: Final = 10.0


class AdminCallFailed(Exception):
    """The call could not be made: the message to print and the exit code (2: usage)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def add_admin_options(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--url`` and ``--admin-token-file``: where the ops listener is and its
    admin credential (every client of the admin API)."""
    add_config_option(parser, "gateway.yaml: ops_listen and admin.token")
    parser.add_argument("--url", metavar="URL", help="the ops listener, e.g. http://127.0.0.1:9090")
    parser.add_argument(
        "--admin-token-file",
        metavar="PATH",
        help=f"the admin credential (default: ${ADMIN_TOKEN_ENV}, else admin.token)",
    )


def call_admin(
    args: argparse.Namespace, path: str, body: dict[str, Any], *, user_agent: str
) -> tuple[str, int, dict[str, Any]]:
    """POST ``body`` to ``path`` of the ops listener with the admin credential: (the listener's
    URL, the status, the answer). Raises :class:`AdminCallFailed`."""
    try:
        target = _target(args)
    except OSError as exc:
        raise AdminCallFailed(f"cannot read the admin credential: {exc.strerror}", 2) from None
    if isinstance(target, str):
        raise AdminCallFailed(target, 2)
    url, credential = target
    try:
        status, reply = asyncio.run(
            post_json_once(
                url + path, body, bearer=credential, user_agent=user_agent, timeout_s=TIMEOUT_S
            )
        )
    except OutboundError as exc:
        raise AdminCallFailed(f"{url}: {exc}", 1) from None
    return url, status, reply


def _target(args: argparse.Namespace) -> tuple[str, str] | str:
    """(ops URL, admin credential), or what is missing."""
    url, credential = args.url, None
    if args.admin_token_file:
        credential = Path(args.admin_token_file).read_text("utf-8").strip()
    elif os.environ.get(ADMIN_TOKEN_ENV):
        credential = os.environ[ADMIN_TOKEN_ENV].strip()
    if url is None or credential is None:
        if not args.config:
            return "pass --url and an admin credential, or --config PATH"
        try:
            # Only ops_listen and admin.token: not the file's other secrets.
            ops, token = load_ops_access(args.config)
        except ConfigError as exc:
            return "invalid configuration:\n" + "\n".join(exc.problems)
        if url is None:
            host = ops.host
            host = "127.0.0.1" if host in {"0.0.0.0", "::", ""} else host  # noqa: S104
            url = f"http://{f'[{host}]' if ':' in host else host}:{ops.port}"
        if credential is None:
            if token is None:
                return "admin.token is not set: the gateway has no admin endpoint"
            credential = token.reveal()
    return str(url).rstrip("/"), credential
