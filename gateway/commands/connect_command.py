"""``mcp-gateway connect <backend>``: connect your own account at a ``user_oauth`` backend's
service from a terminal (device style), for a person whose MCP client cannot open links.

With your MCP access token (read from a file or standard input, never from the command line) it
asks the gateway (``POST <prefix>/connections/api/<backend>``,
``gateway/connections/connect_api.py``) for a consent link of yours, prints it, and waits,
asking every :data:`POLL_S` seconds, until you have opened it in a browser, signed in as yourself
and consented at the service (exit 0), or the link has expired (exit 1). Already connected:
says so (exit 0). The link is worth nothing to anyone else: its page acts only for the person
who signs in as you. docs/user-authorization.md#connecting-from-the-command-line.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any, Final
from urllib.parse import urlsplit

from gateway.commands.options import Subparsers, read_token_file
from gateway.config.login_model import DEFAULT_LOGIN_PREFIX
from gateway.outbound.client import post_json_once
from gateway.outbound.failures import OutboundError

__all__ = ["POLL_S", "register"]

POLL_S: Final = 2.0
TIMEOUT_S: Final = 10.0


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "connect",
        help="connect your own account at a user_oauth backend (prints a link, waits)",
        description="Get a consent link for your account at a backend that acts with your own "
        "upstream token, print it, and wait until you have connected in a browser.",
    )
    parser.add_argument("backend", help="the backend's name (as in gateway.yaml)")
    parser.add_argument(
        "--url",
        required=True,
        metavar="URL",
        help="the MCP endpoint, e.g. https://mcp.example.com/mcp",
    )
    parser.add_argument(
        "--token-file", required=True, metavar="PATH", help="your MCP access token ('-': stdin)"
    )
    parser.add_argument(
        "--prefix",
        default=DEFAULT_LOGIN_PREFIX,
        metavar="PATH",
        help=f"the gateway's login.path_prefix (default {DEFAULT_LOGIN_PREFIX})",
    )
    parser.add_argument(
        "--wait-s",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="give up after this long (default: 600, the default link lifetime)",
    )
    parser.set_defaults(handler=_cmd_connect)


def _fail(message: str, code: int = 1) -> int:
    print(f"mcp-gateway connect: {message}", file=sys.stderr)
    return code


async def _ask(url: str, token: str, link: bool) -> tuple[int, dict[str, Any]]:
    return await post_json_once(
        url,
        {"link": True} if link else {},
        bearer=token,
        user_agent="mcp-gateway-connect",
        timeout_s=TIMEOUT_S,
    )


async def _connect(api: str, token: str, wait_s: float) -> int:
    status, reply = await _ask(api, token, link=True)
    if status == 429:  # login.pre_auth_rate: an HTML page, not JSON
        return _fail("429: too many requests from this address; try again in a moment")
    if status != 200:
        return _fail(f"{status}: {reply.get('error_description') or reply.get('error')}")
    if reply.get("state") == "connected":
        print(f"Your account for {reply.get('backend')} is already connected.")
        return 0
    print(f"Open this link in a browser and sign in as yourself:\n\n  {reply.get('url')}\n")
    print("Waiting for the connection...", flush=True)
    deadline = time.monotonic() + min(wait_s, float(reply.get("expires_in") or wait_s))
    while time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)  # polling the gateway: the person acts in their browser
        status, reply = await _ask(api, token, link=False)
        if status == 200 and reply.get("state") == "connected":
            print("Connected.")
            return 0
    return _fail("the link expired before the account was connected; run the command again")


def _cmd_connect(args: argparse.Namespace) -> int:
    try:
        token = read_token_file(args.token_file)
    except OSError as exc:
        return _fail(f"cannot read the token: {exc.strerror}", 2)
    parts = urlsplit(args.url)
    if not token or parts.scheme not in ("http", "https") or not parts.netloc:
        return _fail("an MCP access token and the MCP endpoint's URL are required", 2)
    api = f"{parts.scheme}://{parts.netloc}{args.prefix}/connections/api/{args.backend}"
    try:
        return asyncio.run(_connect(api, token, args.wait_s))
    except OutboundError as exc:
        return _fail(f"{api}: {exc}")
