"""``mcp-gateway`` commands as processes, the way an operator runs them.

:func:`serve_process` starts ``mcp-gateway serve`` and reads its JSON lines as they come
(:meth:`ServeProcess.wait_for` waits for one event, no fixed sleeps); :func:`run_command` runs a
command to its end; :func:`gateway_config` is the ``gateway.yaml`` the process tests share;
:func:`served_gateway` is all of it at once: an issuer, the configuration, the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest

from gateway.dev.dev_issuer import DevIssuer
from tests.support.ports import free_port

__all__ = [
    "RESOURCE",
    "SERVICE_TOKEN",
    "ServeProcess",
    "Served",
    "gateway_config",
    "run_command",
    "serve_process",
    "served_gateway",
    "workers",
]

RESOURCE: Final = "https://mcp.example.test/mcp"
POLICY: Final = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  '*': {scopes: []}\n"
"""Every tool for any token with ``mcp:access``: the process tests are not about the policy."""
SERVICE_TOKEN: Final = "service-secret"
"""The gateway's credential at the backend of :func:`served_gateway` (what
:class:`~tests.support.upstreams.ModernUpstream` accepts by default)."""
GATEWAY_SECRET: Final = "served-gateway-introspection-secret"


def gateway_config(
    *,
    issuer_url: str,
    backend_url: str,
    secret: Mapping[str, str],
    credential: Mapping[str, str],
    resource: str = RESOURCE,
    port: int = 0,
    ops_port: int = 0,
    policy: str = "policy.yaml",
    issuer: Mapping[str, Any] | None = None,
    **sections: Any,
) -> dict[str, Any]:
    """A ``gateway.yaml`` for the development issuer (introspection) and a loopback backend;
    ``secret`` and ``credential`` are secret references (``{"env": ...}``, ``{"file": ...}``),
    ``issuer`` more keys of that section, ``sections`` more top-level keys."""
    return {
        "resource": resource,
        "listen": {"host": "127.0.0.1", "port": port},
        "ops_listen": {"host": "127.0.0.1", "port": ops_port},
        "issuer": {
            "url": issuer_url,
            "client_id": "mcp-gateway",
            "client_secret": dict(secret),
            "allow_insecure_http": True,
            **(issuer or {}),
        },
        "backend": {
            "url": backend_url,
            "allow_insecure_http": True,
            "credential": {"type": "bearer", "token": dict(credential)},
        },
        "policy": policy,
        **sections,
    }


def write_config(workdir: Path, config: Mapping[str, Any], policy: str = POLICY) -> Path:
    """``gateway.yaml`` (JSON is YAML) and, unless one is there, ``policy.yaml`` in ``workdir``."""
    if not (workdir / "policy.yaml").exists():
        (workdir / "policy.yaml").write_text(policy)
    path = workdir / "gateway.yaml"
    path.write_text(json.dumps(config))
    return path


async def run_command(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> tuple[int, str, str]:
    """``mcp-gateway ARGS`` to its end: exit status, stdout, stderr. ``env``: its whole
    environment (default: this process's)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.commands",
        *args,
        cwd=cwd,
        env=None if env is None else dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout_s)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@dataclass
class ServeProcess:
    process: asyncio.subprocess.Process
    lines: list[dict[str, Any]] = field(default_factory=list)
    """Its stdout's JSON lines so far (when not sent to a file)."""
    output: list[str] = field(default_factory=list)
    """Its stdout's other lines (e.g. a traceback)."""
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """Set on every line read (and at the end of the output); cleared by the waiters."""
    ended: bool = False

    def event(self, name: str) -> dict[str, Any] | None:
        return next((line for line in self.lines if line.get("event") == name), None)

    async def wait_for(self, name: str, timeout_s: float = 30.0) -> dict[str, Any]:
        """The first line of event ``name``, read as it arrives."""
        async with asyncio.timeout(timeout_s):
            while True:
                self.arrived.clear()  # no await until the wait: no line can slip past
                if (found := self.event(name)) is not None:
                    return found
                if self.ended:
                    pytest.fail(f"serve ended without {name}: {self.output[-20:]}")
                await self.arrived.wait()

    async def started(self, timeout_s: float = 30.0) -> tuple[str, str]:
        """Wait for ``gateway.started``: the MCP URL and the ops base URL it names."""
        started = await self.wait_for("gateway.started", timeout_s)
        return started["mcp_url"], f"http://{started['ops']}"

    async def until_ready(self, ops_url: str, timeout_s: float = 30.0) -> None:
        """Poll ``/readyz`` until 200; fail at once when the process exits."""
        async with aiohttp.ClientSession() as session, asyncio.timeout(timeout_s):
            while True:
                if self.process.returncode is not None:
                    pytest.fail(f"serve exited: {await self.errors()}")
                with contextlib.suppress(aiohttp.ClientConnectionError):
                    async with session.get(ops_url + "/readyz") as response:
                        if response.status == 200:
                            return
                await asyncio.sleep(0.05)

    async def errors(self) -> str:
        """Its stderr, once it has ended (the last 4000 characters)."""
        stderr = self.process.stderr
        return "" if stderr is None else (await stderr.read()).decode()[-4000:]

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while raw := await stdout.readline():
            if raw.startswith(b"{"):
                self.lines.append(json.loads(raw))
            else:
                self.output.append(raw.decode(errors="replace"))
            self.arrived.set()
        self.ended = True
        self.arrived.set()


@contextlib.asynccontextmanager
async def serve_process(
    config: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdout: Path | None = None,
) -> AsyncIterator[ServeProcess]:
    """``mcp-gateway serve --config CONFIG ARGS`` in the config's folder; killed if still
    running at the end. Its stdout is read into :attr:`ServeProcess.lines`, or, with ``stdout``,
    written to that file (an operator's ``> file``)."""
    with contextlib.ExitStack() as files:
        out: Any = asyncio.subprocess.PIPE
        if stdout is not None:
            out = files.enter_context(stdout.open("wb"))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.commands",
            "serve",
            "--config",
            str(config),
            *args,
            stdout=out,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})},
            cwd=config.parent,
        )
    serving = ServeProcess(process)
    reader = asyncio.create_task(serving._read()) if stdout is None else None
    try:
        yield serving
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        if reader is not None:
            await reader


def workers(count: int) -> tuple[str, ...]:
    """The arguments of ``serve`` for ``count`` workers (a group on the asyncio loop, which
    ``--event-loop`` must reach in every worker)."""
    return ("--workers", str(count), *(["--event-loop", "asyncio"] if count > 1 else []))


@dataclass
class Served:
    gw: ServeProcess
    issuer: DevIssuer
    mcp_url: str
    ops_url: str

    def token(self, sub: str = "alice") -> str:
        """An access token of the issuer for ``sub`` with ``mcp:access``."""
        return self.issuer.mint_token(sub=sub, scopes="mcp:access", audience=RESOURCE)

    async def ready(self) -> None:
        await self.gw.until_ready(self.ops_url)

    async def terminated(self) -> str:
        """SIGTERM, and the exit awaited: its stderr."""
        self.gw.process.terminate()
        await asyncio.wait_for(self.gw.process.wait(), 30)
        return await self.gw.errors()


@contextlib.asynccontextmanager
async def served_gateway(
    tmp_path: Path,
    backend_url: str,
    *args: str,
    policy: str = POLICY,
    stdout: Path | None = None,
    **sections: Any,
) -> AsyncIterator[Served]:
    """``mcp-gateway serve ARGS`` on two ports chosen in advance, in front of ``backend_url``
    (which must accept :data:`SERVICE_TOKEN`, read from a file), with a development issuer of
    its own at which it introspects; ``sections``: more top-level keys of ``gateway.yaml``."""
    port, ops_port = free_port(), free_port()
    (tmp_path / "service-token").write_text(SERVICE_TOKEN)
    async with DevIssuer(resources=[RESOURCE]) as issuer:
        issuer.register_client("mcp-gateway", GATEWAY_SECRET, can_introspect=True)
        config = gateway_config(
            issuer_url=issuer.url,
            backend_url=backend_url,
            secret={"env": "SERVED_GW_SECRET"},
            credential={"file": "service-token"},
            port=port,
            ops_port=ops_port,
            **sections,
        )
        path = write_config(tmp_path, config, policy)
        env = {"SERVED_GW_SECRET": GATEWAY_SECRET}
        async with serve_process(path, *args, env=env, stdout=stdout) as gw:
            mcp_url, ops_url = f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{ops_port}"
            yield Served(gw, issuer, mcp_url, ops_url)
