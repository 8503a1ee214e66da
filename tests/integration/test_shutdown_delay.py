"""``limits.shutdown_delay_s`` with real processes: SIGTERM -> not ready -> still serving -> drain.

Kubernetes removes a terminating pod from its Service endpoints asynchronously, so requests keep
arriving for a few seconds after SIGTERM. ``mcp-gateway serve`` runs as a subprocess against a
real development issuer and upstream; the test sends SIGTERM and then real requests.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from gateway.dev.dev_issuer import DevIssuer
from tests.support.live_stack import ServerFactory
from tests.support.mcp_client import modern_body, modern_headers
from tests.support.raw_http import RawResponse, parse_response, request_bytes
from tests.support.serve_process import ServeProcess, served_gateway
from tests.support.upstreams import ModernUpstream

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

POLICY = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  echo: {scopes: []}\n"


@asynccontextmanager
async def serve(
    tmp_path: Path, aiohttp_server: ServerFactory, limits: dict[str, float]
) -> AsyncIterator[tuple[ServeProcess, DevIssuer]]:
    upstream_server = await aiohttp_server(ModernUpstream().app())
    backend_url = str(upstream_server.make_url("/mcp"))
    async with served_gateway(
        tmp_path, backend_url, policy=POLICY, limits=limits, audit={"sink": "off"}
    ) as served:
        yield served.gw, served.issuer


async def ready(session: aiohttp.ClientSession, ops: str) -> int:
    async with session.get(ops + "/readyz") as response:
        return response.status


async def tools_list(mcp_url: str, token: str) -> int:
    # A fresh connection each time: what a load balancer still routing here would open.
    async with aiohttp.ClientSession() as session:
        body, headers = modern_body("tools/list"), modern_headers(token, "tools/list")
        async with session.post(mcp_url, json=body, headers=headers) as response:
            await response.read()
            return response.status


async def test_a_request_sent_during_the_shutdown_delay_is_served_then_the_listener_closes(
    tmp_path: Path, aiohttp_server: ServerFactory
) -> None:
    async with (
        serve(tmp_path, aiohttp_server, {"shutdown_delay_s": 2, "drain_timeout_s": 3}) as (
            gw,
            issuer,
        ),
        aiohttp.ClientSession() as session,
    ):
        started = await gw.wait_for("gateway.started")
        mcp_url = started["mcp_url"]
        assert mcp_url.startswith("http://127.0.0.1:")  # the scheme is part of the URL
        ops = "http://" + started["ops"]
        async with asyncio.timeout(15):
            while await ready(session, ops) != 200:  # noqa: ASYNC110 - polling a probe
                await asyncio.sleep(0.05)
        token = issuer.mint_token(
            sub="erin", scopes="mcp:access", audience="https://mcp.example.test/mcp"
        )
        assert await tools_list(mcp_url, token) == 200

        signalled = time.monotonic()
        gw.process.send_signal(signal.SIGTERM)
        draining = await gw.wait_for("gateway.draining", 5)
        assert draining["shutdown_delay_s"] == 2
        assert await ready(session, ops) == 503  # endpoints controllers see "not ready" at once
        assert await tools_list(mcp_url, token) == 200  # ...and traffic still routed is served
        assert gw.event("gateway.stop_accepting") is None

        await gw.wait_for("gateway.stop_accepting", 10)
        assert time.monotonic() - signalled >= 2
        assert await asyncio.wait_for(gw.process.wait(), 10) == 0
        with pytest.raises(aiohttp.ClientConnectionError):
            await tools_list(mcp_url, token)
    events = [line["event"] for line in gw.lines]
    assert events.index("gateway.draining") < events.index("gateway.stop_accepting")
    assert events[-1] == "gateway.stopped"


async def test_a_second_sigterm_ends_the_delay_at_once(
    tmp_path: Path, aiohttp_server: ServerFactory
) -> None:
    async with serve(tmp_path, aiohttp_server, {"shutdown_delay_s": 120, "drain_timeout_s": 3}) as (
        gw,
        _,
    ):
        await gw.wait_for("gateway.started")
        gw.process.send_signal(signal.SIGTERM)
        await gw.wait_for("gateway.draining", 5)
        gw.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(gw.process.wait(), 15) == 0
    assert gw.event("gateway.stop_accepting") is not None


async def test_without_a_delay_the_listener_stops_at_once(
    tmp_path: Path, aiohttp_server: ServerFactory
) -> None:
    async with serve(tmp_path, aiohttp_server, {"drain_timeout_s": 3}) as (gw, _):
        await gw.wait_for("gateway.started")
        gw.process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(gw.process.wait(), 15) == 0
    assert gw.event("gateway.draining") is not None
    assert gw.event("gateway.draining")["shutdown_delay_s"] == 0  # type: ignore[index]
    assert gw.event("gateway.stop_accepting") is None


def tools_list_bytes(token: str) -> bytes:
    """A kept-alive ``tools/list`` (no ``Connection: close``), as a proxy's pooled request."""
    body = json.dumps(modern_body("tools/list")).encode()
    headers = modern_headers(token, "tools/list")
    return request_bytes(headers, body, close=False)


async def answer_on(
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter], data: bytes
) -> RawResponse:
    reader, writer = connection
    writer.write(data)
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    response = parse_response(head)
    body = await reader.readexactly(int(response.headers["Content-Length"]))
    return RawResponse(response.status, response.headers, body)


async def test_during_the_delay_every_answer_closes_its_connection_and_idle_ones_wait(
    tmp_path: Path, aiohttp_server: ServerFactory
) -> None:
    # Issue 32: a proxy reusing a kept-alive connection the gateway closed under it answers
    # 502 (nginx does not retry a POST). During the delay the gateway says Connection: close
    # on every answer, so the proxy moves off each connection after its answer; connections
    # nobody uses stay open until the delay is over.
    delay_s = 2.0
    async with serve(
        tmp_path, aiohttp_server, {"shutdown_delay_s": delay_s, "drain_timeout_s": 3}
    ) as (gw, issuer):
        started = await gw.wait_for("gateway.started")
        port = int(started["mcp_url"].split(":")[2].split("/")[0])
        async with aiohttp.ClientSession() as session:
            async with asyncio.timeout(15):
                while await ready(session, "http://" + started["ops"]) != 200:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
        token = issuer.mint_token(
            sub="erin", scopes="mcp:access", audience="https://mcp.example.test/mcp"
        )
        request = tools_list_bytes(token)
        used = await asyncio.open_connection("127.0.0.1", port)
        idle = await asyncio.open_connection("127.0.0.1", port)
        try:
            for connection in (used, idle):
                before = await answer_on(connection, request)
                assert before.status == 200
                assert "Connection" not in before.headers  # HTTP/1.1: kept alive

            gw.process.send_signal(signal.SIGTERM)
            await gw.wait_for("gateway.draining", 5)
            signalled = time.monotonic()
            during = await answer_on(used, request)  # the kept-alive connection, reused
            assert during.status == 200
            assert during.headers["Connection"] == "close"
            assert await asyncio.wait_for(used[0].read(), 5) == b""  # closed after the answer
            fresh = await asyncio.open_connection("127.0.0.1", port)
            try:
                answered = await answer_on(fresh, request)
                assert (answered.status, answered.headers["Connection"]) == (200, "close")
                assert await asyncio.wait_for(fresh[0].read(), 5) == b""
            finally:
                fresh[1].close()

            # The idle connection is closed only when the delay is over (the listener stops).
            assert await asyncio.wait_for(idle[0].read(), delay_s + 5) == b""
            assert gw.event("gateway.stop_accepting") is not None
            assert time.monotonic() - signalled >= delay_s - 0.3
        finally:
            for _, writer in (used, idle):
                writer.close()
        assert await asyncio.wait_for(gw.process.wait(), 10) == 0
