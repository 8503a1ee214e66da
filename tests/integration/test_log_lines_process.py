"""Batched log lines in a real ``mcp-gateway serve`` process: SIGTERM loses no audit event.

Access lines and audit events are written per loop iteration (gateway/observability/lines.py),
not per line. With stdout redirected to a file, as an operator runs it, a SIGTERM while tool
calls are in flight must still leave one access line and one audit event per answered call,
every line whole JSON, the drain's own lines last, and exit 0 without a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from gateway.dev.issuer import DevIssuer
from tests.support.ports import free_port
from tests.support.upstreams import ModernUpstream

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sends SIGTERM"),
]

RESOURCE = "https://mcp.example.test/mcp"
SECRET = "lines-process-introspection-secret"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}


def call(i: int) -> bytes:
    params = {"name": "echo", "arguments": {"text": f"call {i}"}, "_meta": META}
    message = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
    return json.dumps(message).encode()


async def wait_for_line(path: Path, event: str, timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for raw in path.read_text().splitlines():  # noqa: ASYNC240 - a small file, a test
            line = json.loads(raw)
            if line.get("event") == event:
                return line
        await asyncio.sleep(0.05)
    pytest.fail(f"no {event} line: {path.read_text()[-2000:]}")  # noqa: ASYNC240


@pytest.mark.parametrize("workers", [1, 2])
async def test_sigterm_with_calls_in_flight_leaves_every_access_line_and_audit_event(
    tmp_path: Path, workers: int
) -> None:
    upstream = ModernUpstream(accepted={"svc-token"}, fault="slow", slow_s=1.0)
    backend = TestServer(upstream.app(), host="127.0.0.1")
    await backend.start_server()
    issuer = DevIssuer(resources=[RESOURCE])
    await issuer.start()
    issuer.register_client("mcp-gateway", SECRET, can_introspect=True)
    token = issuer.mint_token(sub="alice", scopes="mcp:access", audience=RESOURCE)
    port, ops_port = free_port(), free_port()
    (tmp_path / "svc").write_text("svc-token")
    (tmp_path / "policy.yaml").write_text(
        "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  echo: {scopes: []}\n"
    )
    (tmp_path / "gateway.yaml").write_text(
        json.dumps(
            {
                "resource": RESOURCE,
                "listen": {"host": "127.0.0.1", "port": port},
                "ops_listen": {"host": "127.0.0.1", "port": ops_port},
                "issuer": {
                    "url": issuer.url,
                    "client_id": "mcp-gateway",
                    "client_secret": {"env": "LINES_GW_SECRET"},
                    "allow_insecure_http": True,
                },
                "backend": {
                    "url": str(backend.make_url("/mcp")),
                    "allow_insecure_http": True,
                    "credential": {"type": "bearer", "token": {"file": "svc"}},
                },
                "policy": "policy.yaml",
                "limits": {"principal_rate": None, "pre_auth_rate": None},
            }
        )
    )
    log = tmp_path / "stdout.log"
    with log.open("wb") as out:  # the operator's `> file`
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gateway.cli", "serve", "--config", "gateway.yaml",
            "--workers", str(workers), *(["--event-loop", "asyncio"] if workers > 1 else []),
            stdout=out, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "LINES_GW_SECRET": SECRET}, cwd=tmp_path,
        )  # fmt: skip
    try:
        started = await wait_for_line(log, "gateway.started")
        # The default (auto) with uvloop installed; --event-loop reaches the workers too.
        assert started["event_loop"] == ("uvloop" if workers == 1 else "asyncio")
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "echo",
        }
        async with aiohttp.ClientSession() as session:
            await _until_ready(session, f"http://127.0.0.1:{ops_port}/readyz")
            n = 40

            async def one(i: int) -> int:
                async with session.post(url, data=call(i), headers=headers) as response:
                    await response.read()
                    return response.status

            calls = [asyncio.ensure_future(one(i)) for i in range(n)]
            deadline = time.monotonic() + 20
            while len(upstream.calls("tools/call")) < n and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            assert len(upstream.calls("tools/call")) == n  # all in flight at the signal
            process.send_signal(signal.SIGTERM)
            statuses = await asyncio.wait_for(asyncio.gather(*calls), 30)
        assert statuses == [200] * n
        assert await asyncio.wait_for(process.wait(), 30) == 0
        assert process.stderr is not None
        errors = (await process.stderr.read()).decode()
        assert "Traceback" not in errors, errors
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await issuer.stop()
        await backend.close()
    lines = [json.loads(raw) for raw in log.read_text().splitlines()]  # each one whole JSON
    access = [x for x in lines if x.get("event") == "mcp.request" and x["method"] == "tools/call"]
    audit = [x for x in lines if x.get("log") == "audit"]
    assert len(access) == n and len(audit) == n
    assert {x["request_id"] for x in access} == {x["request_id"] for x in audit}
    assert all(x["outcome"] == "ok" for x in audit)
    assert not [x for x in lines if x.get("level") in ("error", "critical")]
    assert "Traceback" not in log.read_text()
    if workers == 1:
        assert lines[-1]["event"] == "gateway.stopped"  # the drain's lines made it out, last
    else:
        assert {x.get("worker") for x in access} <= {0, 1}
        assert lines[-1]["event"] == "supervisor.stopped"


async def _until_ready(session: aiohttp.ClientSession, ops: str) -> None:
    for _ in range(400):
        async with session.get(ops) as response:
            if response.status == 200:
                return
        await asyncio.sleep(0.05)
    pytest.fail("never ready")
