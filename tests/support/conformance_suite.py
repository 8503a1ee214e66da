"""The official MCP conformance suite (``@modelcontextprotocol/conformance``) run by a test.

:func:`run_scenario` runs one server scenario of the pinned npm package against a URL behind a
loopback forwarder that adds a bearer token (the suite cannot send one), and returns the checks
it wrote and what it printed. Installed with ``npm ci --prefix tests/interop/conformance`` (as
``.ci/run`` does); :data:`INSTALLED` says whether it is. Node 20 lacks ``fs.globSync`` (Node 22
has it): the CLI's one import of it is pointed at a shim (``tests/support/conformance/
globsync.mjs``) in a copy made for the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from tests.support.live_stack import ServerFactory

__all__ = ["INSTALLED", "Run", "forwarder", "run_scenario"]

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "tests/interop/conformance/node_modules/@modelcontextprotocol/conformance/dist"
SHIM = ROOT / "tests/support/conformance/globsync.mjs"
GLOB_IMPORT = "import{existsSync as i,globSync as a,"
INSTALLED = (DIST / "index.js").exists() and shutil.which("node") is not None
PASSED_BACK = ("content-type", "cache-control", "www-authenticate", "retry-after", "mcp-session-id")
"""The answer's headers the forwarder passes back to the suite."""


def _cli(directory: Path) -> list[str]:
    """``node <the CLI>``, its ``fs.globSync`` import taken from the shim (Node 20)."""
    source = (DIST / "index.js").read_text(encoding="utf-8")
    if GLOB_IMPORT in source:
        shimmed = f'import{{globSync as a}}from"{SHIM.as_uri()}";import{{existsSync as i,'
        source = source.replace(GLOB_IMPORT, shimmed, 1)
    # Beside index.js (its imports resolve there); named by process too: tmp_path names repeat
    # across parallel test workers.
    patched = DIST / f"index-{os.getpid()}-{directory.name}.mjs"
    patched.write_text(source, encoding="utf-8")
    return ["node", str(patched)]


def forwarder(target: str, token: str) -> web.Application:
    """Requests to ``/mcp`` go to ``target`` with ``Authorization`` added, answers come back
    (with the session id a legacy ``initialize`` may carry)."""
    session: dict[str, aiohttp.ClientSession] = {}

    async def forward(request: web.Request) -> web.StreamResponse:
        if "s" not in session:
            session["s"] = aiohttp.ClientSession()
        client = session["s"]
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("host", "content-length", "authorization")
        }
        headers["Authorization"] = f"Bearer {token}"
        body = await request.read()
        async with client.request(request.method, target, data=body, headers=headers) as up:
            payload = await up.read()
            out = {k: v for k, v in up.headers.items() if k.lower() in PASSED_BACK}
            return web.Response(status=up.status, body=payload, headers=out)

    async def close(_: web.Application) -> None:
        if "s" in session:
            await session["s"].close()

    app = web.Application()
    app.router.add_route("*", "/mcp", forward)
    app.on_cleanup.append(close)
    return app


class Run:
    """One scenario's outcome: its checks (``checks.json``) and what the CLI printed."""

    def __init__(self, checks: list[dict[str, Any]], printed: str) -> None:
        self.checks = checks
        self.printed = printed

    def with_status(self, status: str) -> list[dict[str, Any]]:
        return [check for check in self.checks if check.get("status") == status]

    @property
    def passed(self) -> set[str]:
        return {str(check.get("id")) for check in self.with_status("SUCCESS")}


async def run_scenario(
    directory: Path,
    aiohttp_server: ServerFactory,
    *,
    target: str,
    token: str,
    scenario: str,
    version: str | None = None,
) -> Run:
    """Run ``scenario`` against ``target`` (a ``/mcp`` URL) through a forwarder adding
    ``token``; ``version``: the wire the suite speaks (its default when None)."""
    front = await aiohttp_server(forwarder(target, token))
    out = directory / f"results-{scenario}"
    command = _cli(directory)
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            "server",
            "--url",
            str(front.make_url("/mcp")),
            "--scenario",
            scenario,
            "--output-dir",
            str(out),
            *(("--spec-version", version) if version else ()),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        printed, _ = await asyncio.wait_for(process.communicate(), timeout=120)
    finally:
        await front.close()
        _remove(command[1])
    return Run(_checks(out), printed.decode(errors="replace"))


def _remove(path: str) -> None:
    Path(path).unlink(missing_ok=True)


def _checks(out: Path) -> list[dict[str, Any]]:
    return [
        check
        for path in out.rglob("checks.json")
        for check in json.loads(path.read_text(encoding="utf-8"))
    ]
