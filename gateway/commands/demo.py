"""``mcp-gateway demo`` and ``mcp-gateway demo token``: the command line of the demo.

DEVELOPMENT ONLY. ``demo`` starts the stack (:mod:`gateway.demo.stack`), writes the state file
(URLs, ready-made tokens, how to mint more) and prints the banner until Ctrl-C;
``demo token --scopes "mcp:access notes:read"`` mints a token against a running demo, using the
admin secret in its state file.
"""

from __future__ import annotations

import argparse
import asyncio
import shlex
import signal
import sys
from pathlib import Path
from typing import Any, Literal

from joserfc.jwk import ECKey

from gateway.commands.options import Subparsers
from gateway.demo.stack import default_state_file, start_demo, wait_ready, write_state
from gateway.dev.demo_setup import DemoEndpoints, render_banner, render_dpop_banner
from gateway.dev.dpop_proofs import sign_proof
from gateway.errors import ConfigError
from gateway.jsonkit.read import loads
from gateway.observability.logging import configure
from gateway.outbound.client import post_json_once
from gateway.outbound.failures import OutboundError

__all__ = ["log_settings", "register"]


async def _run(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        stack = await start_demo(
            host=args.host,
            port=args.port,
            issuer_port=args.issuer_port,
            backend_port=args.backend_port,
            ops_port=args.ops_port,
            vault_port=args.vault_port,
            force_non_loopback=args.force_non_loopback,
            policy=Path(args.policy) if args.policy else None,
            consent=args.consent,
            tokens=args.tokens,
            dpop=args.dpop,
        )
    except ConfigError as exc:
        print(
            "mcp-gateway demo: invalid demo configuration:",
            *exc.problems,
            sep="\n  ",
            file=sys.stderr,
        )
        return 1
    except (OSError, ValueError) as exc:
        print(f"mcp-gateway demo: cannot start: {exc}", file=sys.stderr)
        return 1
    try:
        if not await wait_ready(stack):
            print(
                "warning: the gateway is not ready yet; see its logs and /readyz", file=sys.stderr
            )
        state_file = Path(args.state_file) if args.state_file else default_state_file()
        write_state(state_file, stack.state())
        endpoints = DemoEndpoints(
            stack.mcp_url,
            stack.issuer_url,
            stack.ops_url,
            stack.backend.url,
            stack.vault.url if stack.vault is not None else "",
            stack.account_url,
            stack.accounts.url if stack.accounts is not None else "",
            stack.accounts_issuer.url if stack.accounts_issuer is not None else "",
        )
        # The banner's `demo token` / `demo proof` lines must find this state file.
        option = "" if args.state_file is None else f" --state-file {shlex.quote(str(state_file))}"
        banner = render_banner(
            endpoints, stack.tokens, str(state_file), stack.auth_mode, state_option=option
        )
        if stack.dpop_token is not None:
            banner += render_dpop_banner(stack.mcp_url, stack.dpop_token, state_option=option)
        print(banner, flush=True)
        await stop.wait()
        print("mcp-gateway demo: stopping", file=sys.stderr, flush=True)
    finally:
        await stack.stop()
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    if getattr(args, "demo_command", None) == "token":
        return _cmd_token(args)
    if getattr(args, "demo_command", None) == "proof":
        return _cmd_proof(args)
    log_format, log_level = log_settings(args)
    configure(log_format, log_level)
    return asyncio.run(_run(args))


LogFormat = Literal["json", "console"]
LogLevel = Literal["debug", "info", "warning", "error"]


def log_settings(args: argparse.Namespace) -> tuple[LogFormat, LogLevel]:
    """``--log-format`` / ``--log-level`` given before or after ``demo`` (argparse has checked
    the choices); the demo's defaults (readable console lines, info) otherwise."""
    log_format: LogFormat = getattr(args, "log_format", "console")
    log_level: LogLevel = getattr(args, "log_level", "info")
    return log_format, log_level


def _state(args: argparse.Namespace, command: str) -> dict[str, Any] | None:
    path = Path(args.state_file) if args.state_file else default_state_file()
    try:
        state = loads(path.read_bytes())
        if not isinstance(state, dict):
            raise ValueError("not an object")
        return state
    except (OSError, ValueError):
        print(f"mcp-gateway demo {command}: no running demo state at {path}", file=sys.stderr)
        return None


def _dpop_key(state: dict[str, Any], command: str) -> ECKey | None:
    try:
        return ECKey.import_key(state["dpop"]["key"])
    except (KeyError, TypeError, ValueError):
        print(f"mcp-gateway demo {command}: the demo runs without --dpop", file=sys.stderr)
        return None


def _cmd_proof(args: argparse.Namespace) -> int:
    """Print a fresh DPoP proof (RFC 9449 §4) signed with the demo client's key."""
    state = _state(args, "proof")
    key = None if state is None else _dpop_key(state, "proof")
    if state is None or key is None:
        return 1
    url = args.url or state["mcp_url"]
    print(sign_proof(key, htm=args.method, htu=url, token=args.token, nonce=args.nonce))
    return 0


def _cmd_token(args: argparse.Namespace) -> int:
    state = _state(args, "token")
    if state is None:
        return 1
    try:
        mint_url, secret = state["mint_url"], state["admin_secret"]
    except KeyError:
        print("mcp-gateway demo token: the state file has no mint_url", file=sys.stderr)
        return 1
    body = {"scopes": args.scopes, "ttl_s": args.ttl}
    if args.sub:
        body["sub"] = args.sub
    headers: dict[str, str] = {}
    if args.dpop:  # RFC 9449 §5: the issuer binds the token to the key that signed this proof
        key = _dpop_key(state, "token")
        if key is None:
            return 1
        headers["DPoP"] = sign_proof(key, htm="POST", htu=mint_url)
    try:
        status, reply = asyncio.run(
            post_json_once(
                mint_url,
                body,
                bearer=secret,
                user_agent="mcp-gateway-demo-token",
                timeout_s=5.0,
                headers=headers,
            )
        )
    except OutboundError:
        print(f"mcp-gateway demo token: the demo at {mint_url} is not reachable", file=sys.stderr)
        return 1
    if status != 200 or "access_token" not in reply:
        print(
            f"mcp-gateway demo token: refused ({status}): {reply.get('error_description', '')}",
            file=sys.stderr,
        )
        return 1
    print(reply["access_token"])
    return 0


def register(subparsers: Subparsers) -> None:
    """Add ``demo`` (and ``demo token``) to the ``mcp-gateway`` command line."""
    demo = subparsers.add_parser(
        "demo",
        help="run the gateway with a local development issuer and demo backend",
        description="Start a development issuer, a demo MCP backend and the gateway on loopback; "
        "print the MCP URL, ready tokens and client setup; run until Ctrl-C.",
    )
    demo.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    demo.add_argument(
        "--port", type=int, default=8080, help="gateway port (default 8080; 0 = free)"
    )
    demo.add_argument("--issuer-port", type=int, default=0, help="issuer port (default: free)")
    demo.add_argument("--backend-port", type=int, default=0, help="backend port (default: free)")
    demo.add_argument("--ops-port", type=int, default=0, help="ops port (default: free)")
    demo.add_argument(
        "--vault-port", type=int, default=0, help="second backend's port (vault; default: free)"
    )
    demo.add_argument(
        "--state-file", metavar="PATH", help=f"state JSON (default {default_state_file()})"
    )
    demo.add_argument(
        "--policy", metavar="PATH", help="policy file (default: the packaged demo policy)"
    )
    demo.add_argument("--consent", choices=("auto", "page"), default="auto", help="OAuth consent")
    demo.add_argument(
        "--tokens",
        choices=("introspection", "jwt", "jwt+introspection"),
        default="introspection",
        help="how the gateway checks tokens: introspection (default); jwt = JWT access tokens "
        "validated locally, the issuer has no introspection endpoint (like Entra ID); both",
    )
    demo.add_argument(
        "--dpop",
        action="store_true",
        help="the issuer also accepts DPoP-bound tokens (RFC 9449): a demo client key and a "
        "bound token are in the state file; mcp-gateway demo proof signs proofs",
    )
    demo.add_argument(
        "--force-non-loopback", action="store_true", help="allow a non-loopback --host (unsafe)"
    )
    # SUPPRESS: a value given before the subcommand (``mcp-gateway --log-format json demo``)
    # must not be overwritten by this subparser's default (see log_settings).
    demo.add_argument(
        "--log-format",
        choices=("json", "console"),
        default=argparse.SUPPRESS,
        help="console (default for the demo) or json lines",
    )
    demo.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default=argparse.SUPPRESS,
        help="minimum level (default info)",
    )
    demo.set_defaults(handler=_cmd_demo)
    sub = demo.add_subparsers(dest="demo_command", metavar="<subcommand>")
    token = sub.add_parser("token", help="mint a token against a running demo")
    token.add_argument(
        "--scopes", required=True, help='space-separated, e.g. "mcp:access notes:read"'
    )
    token.add_argument("--sub", help="subject of the token (default demo-user)")
    token.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds (default 3600)")
    token.add_argument("--state-file", metavar="PATH", help="the running demo's state file")
    token.add_argument(
        "--dpop", action="store_true", help="bind it to the demo client's key (demo --dpop)"
    )
    token.set_defaults(handler=_cmd_demo, demo_command="token")
    proof = sub.add_parser("proof", help="print a DPoP proof for a running demo --dpop")
    proof.add_argument("--token", help="the access token the proof goes with (its ath)")
    proof.add_argument("--method", default="POST", help="the request's method (default POST)")
    proof.add_argument("--url", help="the request's URL (default: the demo's MCP endpoint)")
    proof.add_argument("--nonce", help="a DPoP-Nonce the gateway asked for")
    proof.add_argument("--state-file", metavar="PATH", help="the running demo's state file")
    proof.set_defaults(handler=_cmd_demo, demo_command="proof")
