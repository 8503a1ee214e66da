"""Batched log lines in a real ``mcp-gateway serve`` process: SIGTERM loses no audit event.

Access lines and audit events are written per loop iteration (gateway/observability/lines.py),
not per line. With stdout redirected to a file, as an operator runs it, a SIGTERM while tool
calls are in flight must still leave one access line and one audit event per answered call,
every line whole JSON, the drain's own lines last, and exit 0 without a traceback.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from gateway.dev.dev_issuer import DevIssuer
from tests.support.mcp_client import McpAt
from tests.support.ports import free_port
from tests.support.serve_process import gateway_config, serve_process, write_config
from tests.support.upstreams import ModernUpstream

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sends SIGTERM"),
]

RESOURCE = "https://mcp.example.test/mcp"
SECRET = "lines-process-introspection-secret"


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
    config = gateway_config(
        issuer_url=issuer.url,
        backend_url=str(backend.make_url("/mcp")),
        secret={"env": "LINES_GW_SECRET"},
        credential={"file": "svc"},
        resource=RESOURCE,
        port=port,
        ops_port=ops_port,
        limits={"principal_rate": None, "pre_auth_rate": None},
    )
    log = tmp_path / "stdout.log"  # the operator's `> file`
    serving = serve_process(
        write_config(tmp_path, config),
        "--workers",
        str(workers),
        *(["--event-loop", "asyncio"] if workers > 1 else []),
        env={"LINES_GW_SECRET": SECRET},
        stdout=log,
    )
    try:
        async with serving as gw:
            started = await wait_for_line(log, "gateway.started")
            # The default (auto) with uvloop installed; --event-loop reaches the workers too.
            assert started["event_loop"] == ("uvloop" if workers == 1 else "asyncio")
            await gw.until_ready(f"http://127.0.0.1:{ops_port}")
            client = McpAt(f"http://127.0.0.1:{port}/mcp")
            n = 40
            async with client:
                calls = [
                    asyncio.ensure_future(client.call(token, "echo", {"text": f"call {i}"}, rid=i))
                    for i in range(n)
                ]
                deadline = time.monotonic() + 20
                while len(upstream.calls("tools/call")) < n and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
                assert len(upstream.calls("tools/call")) == n  # all in flight at the signal
                gw.process.send_signal(signal.SIGTERM)
                answers = await asyncio.wait_for(asyncio.gather(*calls), 30)
            assert [status for status, _, _ in answers] == [200] * n
            assert await asyncio.wait_for(gw.process.wait(), 30) == 0
            errors = await gw.errors()
            assert "Traceback" not in errors, errors
    finally:
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
