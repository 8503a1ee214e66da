"""``policy_external`` in a real ``mcp-gateway serve`` process (one worker and a group of two).

``serve`` builds its services before the event loop runs, unlike the in-process test stacks; a
decision point wired too eagerly fails there at startup. Here the real command starts, asks the
tests' AuthZEN server (with the file credential) after the local policy allowed, serves the
allowed call and refuses the other with 403 ``external_policy_denied``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from gateway.dev.issuer import DevIssuer
from tests.support.authzen_pdp import EVALUATION_PATH, AuthZenPdp
from tests.support.ports import free_port
from tests.support.upstreams import ModernUpstream, echo_tool

pytestmark = pytest.mark.slow

RESOURCE = "https://mcp.example.test/mcp"
SECRET = "pdp-process-introspection-secret"
PDP_SECRET = "pdp-process-credential"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}


@pytest.mark.parametrize("workers", [1, 2])
async def test_serve_starts_with_a_decision_point_and_asks_it(tmp_path: Path, workers: int) -> None:
    upstream = ModernUpstream(
        accepted={"svc-token"}, tools=[echo_tool("echo"), echo_tool("danger")]
    )
    backend = TestServer(upstream.app(), host="127.0.0.1")
    await backend.start_server()
    pdp = AuthZenPdp(
        rule=lambda body: body["resource"]["id"] != "danger", credential=f"Bearer {PDP_SECRET}"
    )
    pdp_server = TestServer(pdp.app(), host="127.0.0.1")
    await pdp_server.start_server()
    issuer = DevIssuer(resources=[RESOURCE])
    await issuer.start()
    issuer.register_client("mcp-gateway", SECRET, can_introspect=True)
    token = issuer.mint_token(sub="alice", scopes="mcp:access", audience=RESOURCE)
    port, ops_port = free_port(), free_port()
    (tmp_path / "svc").write_text("svc-token")
    (tmp_path / "pdp-token").write_text(PDP_SECRET + "\n")
    (tmp_path / "policy.yaml").write_text(
        "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  '*': {scopes: []}\n"
    )
    config = {
        "resource": RESOURCE,
        "listen": {"host": "127.0.0.1", "port": port},
        "ops_listen": {"host": "127.0.0.1", "port": ops_port},
        "issuer": {"url": issuer.url, "client_id": "mcp-gateway",
                   "client_secret": {"env": "PDP_GW_SECRET"}, "allow_insecure_http": True},
        "backend": {"url": str(backend.make_url("/mcp")), "allow_insecure_http": True,
                    "credential": {"type": "bearer", "token": {"file": "svc"}}},
        "policy": "policy.yaml",
        "policy_external": {
            "url": str(pdp_server.make_url(EVALUATION_PATH)), "allow_insecure_http": True,
            "credential": {"type": "bearer", "token": {"file": "pdp-token"}},
        },
    }  # fmt: skip
    (tmp_path / "gateway.yaml").write_text(json.dumps(config))
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", "serve", "--config", "gateway.yaml",
        "--workers", str(workers), *(["--event-loop", "asyncio"] if workers > 1 else []),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PDP_GW_SECRET": SECRET}, cwd=tmp_path,
    )  # fmt: skip
    try:
        async with aiohttp.ClientSession() as session:
            await _until_ready(session, f"http://127.0.0.1:{ops_port}/readyz", process)
            answers = {}
            for tool in ("echo", "danger"):
                params = {"name": tool, "arguments": {"text": "x"}, "_meta": META}
                body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
                headers = {
                    "Authorization": f"Bearer {token}", "Content-Type": "application/json",
                    "Accept": "application/json", "MCP-Protocol-Version": "2026-07-28",
                    "Mcp-Method": "tools/call", "Mcp-Name": tool,
                }  # fmt: skip
                url = f"http://127.0.0.1:{port}/mcp"
                async with session.post(url, json=body, headers=headers) as response:
                    answers[tool] = (response.status, await response.json())
        assert answers["echo"][0] == 200, answers
        assert answers["danger"][0] == 403
        assert answers["danger"][1]["error"]["code"] == -31403
        assert [seen.headers["Authorization"] for seen in pdp.seen] == [f"Bearer {PDP_SECRET}"] * 2
        assert [r.json["params"]["name"] for r in upstream.calls("tools/call")] == ["echo"]
    finally:
        if process.returncode is None:
            process.terminate()
            await asyncio.wait_for(process.wait(), 30)
        await issuer.stop()
        await backend.close()
        await pdp_server.close()
    assert process.stderr is not None
    errors = (await process.stderr.read()).decode()
    assert "Traceback" not in errors, errors


async def _until_ready(
    session: aiohttp.ClientSession, ops: str, process: asyncio.subprocess.Process
) -> None:
    for _ in range(400):
        if process.returncode is not None:
            assert process.stderr is not None
            pytest.fail(f"serve exited: {(await process.stderr.read()).decode()[-2000:]}")
        try:
            async with session.get(ops) as response:
                if response.status == 200:
                    return
        except aiohttp.ClientConnectionError:
            pass
        await asyncio.sleep(0.05)
    pytest.fail("never ready")
