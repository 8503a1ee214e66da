"""The official MCP conformance suite (``@modelcontextprotocol/conformance``) through the gateway.

The suite's 2026-07-28 server scenarios for prompts, resources, completions and caching run
against the gateway fronting the official SDK's ``MCPServer`` holding the fixtures those
scenarios read, as their descriptions specify (``sdk_upstream(conformance=True)``). The
suite cannot send a bearer token, so a loopback forwarder adds one minted by the dev issuer (the
gateway still authenticates and authorizes every request, under a policy with a rule per
fixture).

Runs when the pinned npm package is installed (``npm ci --prefix tests/interop/conformance``,
as ``.ci/run`` does, which also requires it); skipped otherwise. Node 20 lacks ``fs.globSync``
(Node 22 has it): the CLI's one import of it is pointed at a shim
(``tests/support/conformance/globsync.mjs``) in a copy made for the run.
``MCP_GATEWAY_CONFORMANCE_SCENARIOS`` overrides the scenarios (space separated).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from tests.support.live_stack import ServerFactory, live_stack
from tests.support.policy import policy_text
from tests.support.sdk_upstream import sdk_upstream

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "tests/interop/conformance/node_modules/@modelcontextprotocol/conformance/dist"
SHIM = ROOT / "tests/support/conformance/globsync.mjs"
GLOB_IMPORT = "import{existsSync as i,globSync as a,"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (DIST / "index.js").exists() or shutil.which("node") is None,
        reason="the conformance suite is not installed (npm ci --prefix tests/interop/conformance)",
    ),
]


def cli(directory: Path) -> list[str]:
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


POLICY = policy_text(
    tools={"*": ""},
    prompts={"test_*": ""},
    resources={
        "test://static-text": "",
        "test://static-binary": "",
        "test://template/**": "",
        "test://nonexistent-resource-for-conformance-testing": "",
    },
)

SCENARIOS = tuple(
    os.environ.get(
        "MCP_GATEWAY_CONFORMANCE_SCENARIOS",
        "caching resources-list resources-read-text resources-read-binary "
        "resources-templates-read sep-2164-resource-not-found prompts-list prompts-get-simple "
        "prompts-get-with-args prompts-get-embedded-resource prompts-get-with-image "
        "completion-complete",
    ).split()
)
"""Every 2026-07-28 server scenario about prompts, resources, completion and caching (and,
below, the 2025-11-25 session lifecycle)."""


def _remove(path: str) -> None:
    Path(path).unlink(missing_ok=True)


PASSED_BACK = ("content-type", "cache-control", "www-authenticate", "retry-after", "mcp-session-id")
"""The answer's headers the forwarder passes back to the suite."""


def _forwarder(target: str, token: str) -> web.Application:
    """Requests to ``/mcp`` go to the gateway with ``Authorization`` added, answers come back
    (with the session id a legacy ``initialize`` may carry)."""
    session: dict[str, aiohttp.ClientSession] = {}

    async def forward(request: web.Request) -> web.StreamResponse:
        if "s" not in session:
            session["s"] = aiohttp.ClientSession()
        client = session["s"]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host",
                   "content-length", "authorization")}  # fmt: skip
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


@pytest.mark.parametrize(
    ("scenario", "version"),
    [*((s, None) for s in SCENARIOS), ("server-session-lifecycle", "2025-11-25")],
)
async def test_the_conformance_scenario_passes_through_the_gateway(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    scenario: str,
    version: str | None,
) -> None:
    """``version``: the wire the suite speaks (its default when None). On 2025-11-25 the
    session lifecycle: the gateway mints a session (the caller hears the tools'
    ``list_changed``), and after ``DELETE`` a request with that id is 404."""
    async with (
        sdk_upstream(conformance=True) as sdk,
        live_stack(tmp_path, aiohttp_server, monkeypatch, backend_url=sdk.url,
                   policy=POLICY) as stack,
    ):  # fmt: skip
        token = stack.token("mcp:access")
        front = await aiohttp_server(_forwarder(stack.server.mcp_url, token))
        out = tmp_path / "results"
        command = cli(tmp_path)
        process = await asyncio.create_subprocess_exec(
            *command, "server", "--url", str(front.make_url("/mcp")),
            "--scenario", scenario, "--output-dir", str(out),
            *(("--spec-version", version) if version else ()),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        printed, _ = await asyncio.wait_for(process.communicate(), timeout=120)
        await front.close()
        _remove(command[1])
    text = printed.decode(errors="replace")
    assert token not in text
    checks = [
        check
        for path in out.rglob("checks.json")
        for check in json.loads(path.read_text(encoding="utf-8"))
    ]
    failed = [c for c in checks if c.get("status") == "FAILURE"]
    assert checks, text
    assert failed == [], text
    if version is not None:  # a session was minted and ended: not skipped as stateless
        passed = {c.get("id") for c in checks if c.get("status") == "SUCCESS"}
        assert "server-session-terminated-returns-404" in passed, text
