"""``mcp-gateway demo``: the real gateway, a development issuer and a demo backend in one process.

DEVELOPMENT ONLY. Everything binds to loopback (``--force-non-loopback`` overrides it). The
gateway is the production :class:`~gateway.app.GatewayServer`, built from a generated
``gateway.yaml`` (in a temporary directory) that points at the development issuer
(:mod:`gateway.dev.issuer`, introspection with ``client_secret_basic``) and the demo backend
(:mod:`gateway.dev.demo_backend`, a bearer service token), with ``gateway/dev/demo-policy.yaml``.

Programmatic use (the end-to-end tests)::

    stack = await start_demo(port=0)
    ... stack.mcp_url, stack.tokens["reader"], stack.issuer ...
    await stack.stop()

``mcp-gateway demo token --scopes "mcp:access notes:read"`` mints a token against a running demo,
using the admin secret in its state file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from gateway.app import GatewayServer
from gateway.config import load_config
from gateway.dev.demo_backend import DemoBackend
from gateway.dev.demo_setup import DEMO_ROLES, DemoEndpoints, render_banner, render_gateway_yaml
from gateway.dev.issuer import DevIssuer
from gateway.dev.loopback import check_bind_host
from gateway.errors import ConfigError
from gateway.observability.logging import configure
from gateway.outbound import Destination, Outbound, OutboundError
from gateway.wiring import build_services

__all__ = ["DemoStack", "default_state_file", "register", "start_demo"]

GATEWAY_CLIENT_ID: Final = "mcp-gateway"
DEMO_TOKEN_TTL_S: Final = 12 * 3600
"""The ready-made tokens last a working day; ``demo token`` mints shorter ones by default."""
READY_TIMEOUT_S: Final = 30.0


def default_state_file() -> Path:
    """``$XDG_RUNTIME_DIR/mcp-gateway-demo.json``, else ``~/.cache/mcp-gateway/demo.json``."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "mcp-gateway-demo.json"
    return Path.home() / ".cache" / "mcp-gateway" / "demo.json"


DEMO_POLICY: Final = Path(__file__).resolve().parent / "dev" / "demo-policy.yaml"
"""The demo's policy (``demo: true``), packaged with the code so an installed ``mcp-gateway demo``
finds it; it lives next to the dev code, not in ``policies/``, so no deployment mounts it."""


def default_policy() -> Path:
    """``gateway/dev/demo-policy.yaml``, installed as package data."""
    return DEMO_POLICY


@dataclass
class DemoStack:
    """A running demo: issuer, backend and gateway, plus the ready-made tokens."""

    issuer: DevIssuer
    backend: DemoBackend
    gateway: GatewayServer
    workdir: Path
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def mcp_url(self) -> str:
        return self.gateway.config.resource

    @property
    def issuer_url(self) -> str:
        return self.issuer.url

    @property
    def ops_url(self) -> str:
        return self.gateway.ops_url

    def state(self) -> dict[str, Any]:
        """The state-file document: URLs, tokens, and how to mint more."""
        return {
            "mcp_url": self.mcp_url,
            "issuer_url": self.issuer_url,
            "ops_url": self.ops_url,
            "tokens": dict(self.tokens),
            "mint_url": f"{self.issuer_url}/dev/tokens",
            "admin_secret": self.issuer.admin_secret,
            "pid": os.getpid(),
        }

    async def stop(self) -> None:
        """Gateway first (drains in-flight calls), then backend and issuer; remove the workdir."""
        try:
            await self.gateway.stop()
        finally:
            await self.backend.stop()
            await self.issuer.stop()
            shutil.rmtree(self.workdir, ignore_errors=True)


def _free_port(host: str) -> int:
    # The resource URL must name the port before the gateway binds, so pick a free one now.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _url_host(host: str) -> str:
    if host in {"0.0.0.0", "::"}:  # noqa: S104 - mapping an unspecified bind to a usable URL
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _write_secret(path: Path, value: str) -> None:
    path.write_text(value + "\n", encoding="utf-8")
    path.chmod(0o600)


async def start_demo(
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    issuer_port: int = 0,
    backend_port: int = 0,
    ops_port: int = 0,
    force_non_loopback: bool = False,
    policy: Path | None = None,
    cache_max_ttl_s: int = 5,
    consent: str = "auto",
) -> DemoStack:
    """Start issuer, backend and gateway; mint the reader/writer/admin tokens.

    Raises ``ValueError`` for a non-loopback host without ``force_non_loopback``,
    :class:`~gateway.errors.ConfigError` if the generated configuration or policy is invalid,
    and ``OSError`` if a port cannot be bound.
    """
    check_bind_host(host, force_non_loopback)
    policy_path = (policy or default_policy()).resolve()
    if not policy_path.exists():
        raise ConfigError([f"{policy_path}: demo policy not found (pass --policy PATH)"])
    gateway_port = port or _free_port(host)
    resource = f"http://{_url_host(host)}:{gateway_port}/mcp"
    issuer = DevIssuer(
        host,
        issuer_port,
        resources=[resource],
        allow_non_loopback=force_non_loopback,
        # Clients that ask only for the advertised baseline scope become readers.
        grant_scopes=("mcp:access", "notes:read"),
        default_scopes=("mcp:access",),
        consent="page" if consent == "page" else "auto",
    )
    backend = DemoBackend(
        host,
        backend_port,
        service_token=secrets.token_urlsafe(32),
        allow_non_loopback=force_non_loopback,
    )
    workdir = Path(tempfile.mkdtemp(prefix="mcp-gateway-demo-"))
    started: list[Any] = []
    try:
        await issuer.start()
        started.append(issuer)
        await backend.start()
        started.append(backend)
        client_secret = secrets.token_urlsafe(32)
        issuer.register_client(
            GATEWAY_CLIENT_ID,
            client_secret,
            grant_types=["client_credentials"],
            scopes=["mcp:access"],
            can_introspect=True,
        )
        _write_secret(workdir / "issuer-client-secret", client_secret)
        _write_secret(workdir / "backend-service-token", backend.service_token)
        config_path = workdir / "gateway.yaml"
        config_path.write_text(
            render_gateway_yaml(
                resource=resource,
                listen_host=host,
                listen_port=gateway_port,
                ops_host=host,
                ops_port=ops_port,
                issuer_url=issuer.url,
                client_id=GATEWAY_CLIENT_ID,
                backend_url=backend.url,
                policy_path=str(policy_path),
                cache_max_ttl_s=cache_max_ttl_s,
            ),
            encoding="utf-8",
        )
        config = load_config(config_path)
        gateway = GatewayServer(config, build_services(config))
        await gateway.start()
    except BaseException:
        for server in reversed(started):
            await server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    stack = DemoStack(issuer, backend, gateway, workdir)
    for role, scopes in DEMO_ROLES.items():
        stack.tokens[role] = issuer.mint_token(
            sub=f"demo-{role}", client_id="demo-cli", scopes=scopes, ttl_s=DEMO_TOKEN_TTL_S
        )
    return stack


async def wait_ready(stack: DemoStack, timeout_s: float = READY_TIMEOUT_S) -> bool:
    """Wait until the gateway's readiness checks pass (startup discovery, first catalog)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if stack.gateway.readiness.evaluate()[0] == "ready":
            return True
        await asyncio.sleep(0.05)
    return False


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write atomically with mode 0600 (it holds bearer tokens and the admin secret)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2)
        handle.write("\n")
    temporary.replace(path)


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
            force_non_loopback=args.force_non_loopback,
            policy=Path(args.policy) if args.policy else None,
            consent=args.consent,
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
        endpoints = DemoEndpoints(stack.mcp_url, stack.issuer_url, stack.ops_url, stack.backend.url)
        print(render_banner(endpoints, stack.tokens, str(state_file)), flush=True)
        await stop.wait()
        print("mcp-gateway demo: stopping", file=sys.stderr, flush=True)
    finally:
        await stack.stop()
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    if getattr(args, "demo_command", None) == "token":
        return _cmd_token(args)
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


def _cmd_token(args: argparse.Namespace) -> int:
    path = Path(args.state_file) if args.state_file else default_state_file()
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        mint_url, secret = state["mint_url"], state["admin_secret"]
    except (OSError, ValueError, KeyError):
        print(f"mcp-gateway demo token: no running demo state at {path}", file=sys.stderr)
        return 1
    body = {"scopes": args.scopes, "ttl_s": args.ttl}
    if args.sub:
        body["sub"] = args.sub
    try:
        status, reply = asyncio.run(_mint(mint_url, secret, body))
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


async def _mint(url: str, secret: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    outbound = Outbound(user_agent="mcp-gateway-demo-token")
    outbound.add(Destination("demo-issuer", connect_timeout_s=3.0))
    try:
        response = await outbound.request(
            "demo-issuer",
            "POST",
            url,
            timeout_s=5.0,
            headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
            body=json.dumps(body).encode(),
            max_body=65_536,
        )
    finally:
        await outbound.close()
    try:
        reply = json.loads(response.body)
    except ValueError:
        reply = {}
    return response.status, reply if isinstance(reply, dict) else {}


def register(subparsers: Any) -> None:
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
        "--state-file", metavar="PATH", help=f"state JSON (default {default_state_file()})"
    )
    demo.add_argument(
        "--policy", metavar="PATH", help="policy file (default: the packaged demo policy)"
    )
    demo.add_argument("--consent", choices=("auto", "page"), default="auto", help="OAuth consent")
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
    token.set_defaults(handler=_cmd_demo, demo_command="token")
