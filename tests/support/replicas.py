"""Several gateway replicas as separate ``mcp-gateway serve`` processes sharing one Redis.

``async with replica_stack(tmp_path, redis, ...) as stack`` starts, in the test's process, the
development issuer (real OAuth introspection over HTTP, counting introspections) and an upstream
MCP server, writes one ``gateway.yaml`` per replica (same resource, issuer, backend, policy and
Redis; own listen ports) and starts each replica as its own process
(``python -m gateway.commands serve``). A :class:`Replica` can be killed (SIGKILL, as a crashed
pod), stopped (SIGTERM, graceful) and started again on the same ports. Logs go to files beside the
configuration, so tests can assert on them (no token in any line).

The upstream's ``hold`` tool sleeps ``hold_s`` and records how many calls ran at once.

A replica must answer ``/readyz`` 200 within ``MCP_GATEWAY_TEST_READY_TIMEOUT_S`` seconds of its
start (default 60: a replica is a fresh interpreter importing the whole gateway, which took over
20 s on a loaded 2-core machine); set it higher on a slower machine. A value that is not a
positive number fails at import.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
from aiohttp import web

from gateway.dev.dev_issuer import DevIssuer
from gateway.dev.loopback import bind_site
from tests.support.mcp_client import modern_headers
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer, unique_prefix
from tests.support.upstreams import ModernUpstream, echo_tool

__all__ = ["HoldUpstream", "Replica", "ReplicaStack", "gateway_command", "replica_stack"]

ROOT: Final = Path(__file__).resolve().parents[2]
READY_TIMEOUT_ENV: Final = "MCP_GATEWAY_TEST_READY_TIMEOUT_S"
DEFAULT_READY_TIMEOUT_S: Final = 60.0


def ready_timeout_s(environ: Mapping[str, str] = os.environ) -> float:
    """How long a replica may take to become ready (:data:`READY_TIMEOUT_ENV`, seconds)."""
    text = environ.get(READY_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_READY_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{READY_TIMEOUT_ENV}={text!r}: expected a positive number of seconds")
    return value


READY_TIMEOUT_S: Final = ready_timeout_s()
SHARED_JWT_INTROSPECTION: Final[dict[str, Any]] = {
    "overrides": {"issuer": {"tokens": "jwt+introspection"}, "state": {"share_token_cache": True}},
    "issuer_options": {"token_format": "jwt"},
}
"""``replica_stack`` options: JWTs that are also introspected, the results shared in Redis."""
MODERN: Final = "2026-07-28"
META: Final = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "replica-tests", "version": "1"},
}
DEFAULT_POLICY: Final = """version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: []}
  hold: {scopes: [], max_concurrency: 1}
"""


@dataclass
class HoldUpstream(ModernUpstream):
    """ModernUpstream plus ``hold``: sleeps ``hold_s``; ``max_active`` is the most at once."""

    hold_s: float = 1.0
    active: int = 0
    max_active: int = 0
    holding: asyncio.Event = field(default_factory=asyncio.Event)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    """Set to end every hold at once (teardown, or a test that is done waiting)."""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        message = json.loads(body) if body else {}
        params = message.get("params") or {}
        if message.get("method") == "tools/call" and params.get("name") == "hold":
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.holding.set()
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.released.wait(), self.hold_s)
            finally:
                self.active -= 1
        return await super().handle(request)


@dataclass
class Replica:
    name: str
    config_path: Path
    port: int
    ops_port: int
    mcp_path: str = "/mcp"
    process: subprocess.Popen[bytes] | None = None
    serve_args: tuple[str, ...] = ()
    """Extra ``serve`` options, e.g. ``("--workers", "2")``."""

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.mcp_path}"

    @property
    def ops_url(self) -> str:
        return f"http://127.0.0.1:{self.ops_port}"

    @property
    def log_path(self) -> Path:
        return self.config_path.with_suffix(".log")

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        log = self.log_path.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gateway.commands",
                "serve",
                "--config",
                str(self.config_path),
                *self.serve_args,
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

    async def wait_ready(self, session: aiohttp.ClientSession) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"replica {self.name} exited:\n{self.log()[-3000:]}")
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(self.ops_url + "/readyz") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.05)
        raise RuntimeError(
            f"replica {self.name} not ready within {READY_TIMEOUT_S:g} s "
            f"(raise {READY_TIMEOUT_ENV} on a slow machine):\n{self.log()[-3000:]}"
        )

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, as a crashed pod (nothing is cleaned up)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> int | None:
        """SIGTERM (graceful drain), then wait for the exit code."""
        process = self.process
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait(timeout=10)

    def log(self) -> str:
        return (
            self.log_path.read_text(encoding="utf-8", errors="replace")
            if self.log_path.exists()
            else ""
        )


@dataclass
class ReplicaStack:
    issuer: DevIssuer
    upstream: HoldUpstream
    redis: RedisServer | None
    replicas: list[Replica]
    session: aiohttp.ClientSession
    workdir: Path
    resource: str
    admin_token: str = ""

    def mint(self, sub: str = "alice", scopes: str = "mcp:access", ttl_s: int = 600) -> str:
        return self.issuer.mint_token(
            sub=sub, client_id="replica-tests", scopes=scopes, ttl_s=ttl_s
        )

    async def post(
        self,
        replica: Replica,
        token: str | None,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
    ) -> tuple[int, Any, Mapping[str, str]]:
        headers = modern_headers(token, method, name)
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": method,
            "params": {**(params or {}), "_meta": META},
        }
        async with self.session.post(replica.mcp_url, json=body, headers=headers) as response:
            text = await response.text()
            payload = json.loads(text) if text else None
            return response.status, payload, dict(response.headers)

    async def call(
        self, replica: Replica, token: str, tool: str, **arguments: Any
    ) -> tuple[int, Any, Mapping[str, str]]:
        return await self.post(
            replica, token, "tools/call", {"name": tool, "arguments": arguments}, name=tool
        )

    async def metric(self, replica: Replica, sample: str) -> float:
        """The value of one sample (``name{labels}`` exactly as exposed), 0 when absent."""
        async with self.session.get(replica.ops_url + "/metrics") as response:
            text = await response.text()
        for line in text.splitlines():
            if line.startswith(sample + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    async def revoke(self, replica: Replica, body: Mapping[str, Any]) -> tuple[int, Any]:
        """POST /admin/revoke on ``replica`` with the admin credential."""
        headers = {"Authorization": f"Bearer {self.admin_token}"}
        async with self.session.post(
            replica.ops_url + "/admin/revoke", json=dict(body), headers=headers
        ) as response:
            text = await response.text()
            try:
                return response.status, json.loads(text)
            except ValueError:
                return response.status, text

    def cli(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        """Run ``mcp-gateway <args>`` as its own process (the admin token in the environment)."""
        env = {**os.environ, "MCP_GATEWAY_ADMIN_TOKEN": self.admin_token}
        return gateway_command(*args, stdin=stdin, cwd=ROOT, env=env)

    async def restart(self, replica: Replica) -> None:
        replica.stop()
        replica.start()
        await replica.wait_ready(self.session)


def gateway_command(
    *args: str, stdin: str, cwd: Path, env: Mapping[str, str]
) -> subprocess.CompletedProcess[str]:
    """``mcp-gateway ARGS`` run to its end in ``cwd`` with the whole environment ``env``, fed
    ``stdin``; its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "gateway.commands", *args],
        cwd=cwd,
        env=dict(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _merge(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` merged in, recursively; a None value removes the key."""
    merged = dict(base)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _write_files(workdir: Path, files: Mapping[str, str]) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (workdir / name).write_text(text if text.endswith("\n") else text + "\n")


def gateway_config(
    *, resource: str, replica: Replica, issuer_url: str, backend_url: str, prefix: str
) -> dict[str, Any]:
    """One replica's gateway.yaml (as a mapping; written as JSON, which YAML reads)."""
    return {
        "resource": resource,
        "listen": {"host": "127.0.0.1", "port": replica.port},
        "ops_listen": {"host": "127.0.0.1", "port": replica.ops_port},
        "issuer": {
            "url": issuer_url,
            "client_id": "mcp-gateway",
            "client_secret": {"file": "issuer-client-secret"},
            "allow_insecure_http": True,
            "cache": {"max_ttl_s": 30},
        },
        "backend": {
            "url": backend_url,
            "allow_insecure_http": True,
            "credential": {"type": "bearer", "token": {"file": "backend-token"}},
        },
        "policy": "policy.yaml",
        "policy_poll_s": 0,
        "limits": {"drain_timeout_s": 5},
        "logging": {"format": "json", "level": "info"},
        "audit": {"sink": "stdout"},
        "admin": {"token": {"file": "admin-token"}},
        # A generous Redis deadline: on a loaded 2-core host (parallel test workers) a healthy
        # call can take far longer than the default, and a timed-out one is a 503 (fail closed),
        # which is not what these tests are about; the deadline's own tests set theirs.
        "state": {
            "backend": "redis",
            "redis": {"url": {"file": "redis-url"}, "key_prefix": prefix, "timeout_ms": 3000},
        },
    }


@contextlib.asynccontextmanager
async def replica_stack(
    workdir: Path,
    redis: RedisServer | None,
    *,
    replicas: int = 2,
    policy: str = DEFAULT_POLICY,
    overrides: Mapping[str, Any] | None = None,
    hold_s: float = 1.0,
    serve_args: tuple[str, ...] = (),
    issuer_options: Mapping[str, Any] | None = None,
    list_changed: bool = False,
) -> AsyncIterator[ReplicaStack]:
    """Issuer + upstream in this process, ``replicas`` gateway processes. ``overrides`` are
    merged (recursively) into every replica's gateway.yaml, e.g. ``{"limits": {...}}``.
    ``redis=None``: ``state.backend: memory``. ``serve_args`` go on every ``serve`` command
    line (``("--workers", "2")``); ``issuer_options`` go to the :class:`DevIssuer` (e.g.
    ``token_format="jwt"``); ``list_changed``: the upstream advertises ``tools.listChanged``
    and serves ``subscriptions/listen`` (``stack.upstream.announce()``)."""
    ports = [(free_port(), free_port()) for _ in range(replicas)]
    resource = f"http://127.0.0.1:{ports[0][0]}/mcp"
    issuer = DevIssuer("127.0.0.1", 0, resources=[resource], **dict(issuer_options or {}))
    upstream = HoldUpstream(
        tools=[echo_tool("echo"), echo_tool("hold")], hold_s=hold_s, list_changed=list_changed
    )
    await issuer.start()
    upstream_runner, upstream_base = await bind_site(upstream.app(), "127.0.0.1", 0)
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
    started: list[Replica] = []
    try:
        client_secret = secrets.token_urlsafe(24)
        admin_token = secrets.token_hex(32)
        issuer.register_client(
            "mcp-gateway", client_secret, scopes=["mcp:access"], can_introspect=True
        )
        _write_files(
            workdir,
            {
                "issuer-client-secret": client_secret,
                "backend-token": "service-secret",
                "redis-url": redis.url if redis is not None else "",
                "admin-token": admin_token,
                "policy.yaml": policy,
            },
        )
        prefix = unique_prefix()
        for index, (port, ops_port) in enumerate(ports):
            replica = Replica(
                chr(ord("a") + index),
                workdir / f"gateway-{index}.yaml",
                port,
                ops_port,
                serve_args=serve_args,
            )
            config = gateway_config(
                resource=resource,
                replica=replica,
                issuer_url=issuer.url,
                backend_url=upstream_base + "/mcp",
                prefix=prefix,
            )
            if redis is None:
                config.pop("state")
            _write_files(
                workdir, {replica.config_path.name: json.dumps(_merge(config, overrides or {}))}
            )
            replica.start()
            started.append(replica)
        await asyncio.gather(*(replica.wait_ready(session) for replica in started))
        yield ReplicaStack(
            issuer, upstream, redis, started, session, workdir, resource, admin_token
        )
    finally:
        for replica in started:
            replica.kill()
        upstream.released.set()
        await session.close()
        await upstream_runner.cleanup()
        await issuer.stop()
