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

from tests.support.live_stack import ServerFactory
from tests.support.mcp_client import McpAt
from tests.support.serve_process import served_gateway, workers
from tests.support.upstreams import ModernUpstream

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sends SIGTERM"),
]


async def wait_for_line(path: Path, event: str, timeout_s: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for raw in path.read_text().splitlines():  # noqa: ASYNC240 - a small file, a test
            line = json.loads(raw)
            if line.get("event") == event:
                return line
        await asyncio.sleep(0.05)
    pytest.fail(f"no {event} line: {path.read_text()[-2000:]}")  # noqa: ASYNC240


@pytest.mark.parametrize("count", [1, 2])
async def test_sigterm_with_calls_in_flight_leaves_every_access_line_and_audit_event(
    tmp_path: Path, aiohttp_server: ServerFactory, count: int
) -> None:
    upstream = ModernUpstream(fault="slow", slow_s=1.0)
    backend = await aiohttp_server(upstream.app())
    log = tmp_path / "stdout.log"  # the operator's `> file`
    async with served_gateway(
        tmp_path,
        str(backend.make_url("/mcp")),
        *workers(count),
        stdout=log,
        limits={"principal_rate": None, "pre_auth_rate": None},
    ) as served:
        started = await wait_for_line(log, "gateway.started")
        # The default (auto) with uvloop installed; --event-loop reaches the workers too.
        assert started["event_loop"] == ("uvloop" if count == 1 else "asyncio")
        await served.ready()
        token, gw = served.token(), served.gw
        n = 40
        async with McpAt(served.mcp_url) as client:
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
    lines = [json.loads(raw) for raw in log.read_text().splitlines()]  # each one whole JSON
    access = [x for x in lines if x.get("event") == "mcp.request" and x["method"] == "tools/call"]
    audit = [x for x in lines if x.get("log") == "audit"]
    assert len(access) == n and len(audit) == n
    assert {x["request_id"] for x in access} == {x["request_id"] for x in audit}
    assert all(x["outcome"] == "ok" for x in audit)
    assert not [x for x in lines if x.get("level") in ("error", "critical")]
    assert "Traceback" not in log.read_text()
    if count == 1:
        assert lines[-1]["event"] == "gateway.stopped"  # the drain's lines made it out, last
    else:
        assert {x.get("worker") for x in access} <= {0, 1}
        assert lines[-1]["event"] == "supervisor.stopped"
