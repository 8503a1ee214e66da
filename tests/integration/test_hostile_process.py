"""``mcp-gateway serve`` as a real process under a bounded attack, and its SIGTERM drain.

The development issuer and the demo backend run in the test process; the gateway runs in its
own, so its resident memory can be read from ``/proc/<pid>/status``. Issue 12 item 1: 50
connections sending 128 x 16 KiB of headers grew the RSS from 68 to 253 MB and slowloris
connections stayed open for an hour; item 9: a SIGTERM cut a slow-body request and took longer
than ``drain_timeout_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
import yaml

from gateway.dev.demo_backend import DemoBackend
from gateway.dev.dev_issuer import DevIssuer
from tests.support.raw_http import parse_response
from tests.support.serve_process import gateway_config, serve_process, write_config

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status and sends SIGTERM"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
RESOURCE = "https://mcp.example.test/mcp"
SECRET = "hostile-process-introspection-secret"
SERVICE_TOKEN = "hostile-process-service-token"
LIST_BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()


@dataclass
class Running:
    process: asyncio.subprocess.Process
    port: int
    ops_port: int
    issuer: DevIssuer

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def rss_kib(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text(encoding="ascii")
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1])

    def headers(self, token: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "MCP-Protocol-Version": "2025-06-18",
        }


@contextlib.asynccontextmanager
async def serve(tmp_path: Path, limits: str) -> AsyncIterator[Running]:
    async with DevIssuer() as issuer, DemoBackend(service_token=SERVICE_TOKEN) as backend:
        issuer.register_client("mcp-gateway", SECRET, can_introspect=True)
        (tmp_path / "service-token").write_text(SERVICE_TOKEN)
        config = gateway_config(
            issuer_url=issuer.url,
            backend_url=backend.url,
            secret={"env": "HOSTILE_GW_SECRET"},
            credential={"file": "service-token"},
            resource=RESOURCE,
            policy=str(ROOT / "gateway" / "dev" / "demo-policy.yaml"),
            audit={"sink": "off"},
            limits=yaml.safe_load(limits),
        )
        path = write_config(tmp_path, config)
        async with serve_process(path, env={"HOSTILE_GW_SECRET": SECRET}) as serving:
            mcp_url, ops_url = await serving.started()
            await serving.until_ready(ops_url)
            port = urlsplit(mcp_url).port  # http://127.0.0.1:<port>/mcp
            ops_port = urlsplit(ops_url).port
            assert port is not None and ops_port is not None
            yield Running(serving.process, port, ops_port, issuer)


async def flood(port: int) -> None:
    """One connection sending 128 header lines of 16 KiB (about 2 MiB), then reading."""
    line = b"X-Flood-%d: " + b"a" * 16_000 + b"\r\n"
    data = b"POST /mcp HTTP/1.1\r\nHost: x\r\n" + b"".join(line % i for i in range(128))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for start in range(0, len(data), 65_536):
            writer.write(data[start : start + 65_536])
            await writer.drain()
        await asyncio.wait_for(reader.read(), 10)
    except (ConnectionError, TimeoutError):
        pass  # cut once past the cap: expected
    finally:
        writer.close()


async def loris(port: int, seconds: float) -> bytes:
    """One connection dribbling a request head, a byte every 100 ms, for at most ``seconds``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = asyncio.ensure_future(reader.read())
    head = b"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b"x" * 200
    try:
        for byte in head[: int(seconds * 10)]:
            if answer.done():
                break
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.wait([answer], timeout=0.1)
        return await asyncio.wait_for(answer, 5)
    except (ConnectionError, TimeoutError):
        return b""
    finally:
        writer.close()


async def test_a_header_flood_and_a_slowloris_leave_memory_bounded_and_service_up(
    tmp_path: Path,
) -> None:
    # header_timeout_s 2, not 1: on a loaded 2-core host (300 attack connections beside the
    # suite's other workers) the normal request's own head once took past 1 s to be read (408).
    async with serve(tmp_path, "{header_timeout_s: 2, keepalive_timeout_s: 3}") as gw:
        token = gw.issuer.mint_token(sub="alice", scopes="mcp:access notes:read", audience=RESOURCE)
        # A new connection per request, as a new client opens: a kept-alive one could be closed
        # by the 3 s keep-alive bound just as it is reused while the attack runs.
        connector = aiohttp.TCPConnector(force_close=True)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def normal() -> int:
                async with session.post(gw.url, data=LIST_BODY, headers=gw.headers(token)) as r:
                    await r.read()
                    return r.status

            assert await normal() == 200
            before = gw.rss_kib()
            lorises = [asyncio.ensure_future(loris(gw.port, 5.0)) for _ in range(200)]
            for _ in range(2):  # 100 flooding connections in two waves of 50
                floods = asyncio.gather(*(flood(gw.port) for _ in range(50)))
                assert await normal() == 200  # served during the attack
                await asyncio.wait_for(floods, 30)
            answers = await asyncio.wait_for(asyncio.gather(*lorises), 30)
            peak = gw.rss_kib()
            assert await normal() == 200
        # Each slow head was answered 408 at the 2 s deadline, not left open.
        statuses = [parse_response(raw).status for raw in answers if raw]
        assert statuses.count(408) >= 190, sorted(set(statuses))
        # aiohttp alone kept ~3.7 MB per flooding connection (50 -> +185 MB); with the 32 KiB cap
        # the whole attack costs a few MB. A generous bound: the point is "bounded".
        assert peak - before < 40_000, (before, peak)


async def test_sigterm_answers_a_slow_body_503_and_exits_within_the_drain_timeout(
    tmp_path: Path,
) -> None:
    async with serve(tmp_path, "{drain_timeout_s: 2}") as gw:
        token = gw.issuer.mint_token(sub="alice", scopes="mcp:access notes:read", audience=RESOURCE)
        never = asyncio.Event()

        async def stalled() -> AsyncIterator[bytes]:
            yield LIST_BODY[:10]
            await never.wait()

        async with aiohttp.ClientSession() as session:
            pending = asyncio.ensure_future(
                session.post(gw.url, data=stalled(), headers=gw.headers(token))
            )
            await asyncio.sleep(0.5)  # authenticated, now waiting for the rest of the body
            sent = time.monotonic()
            gw.process.send_signal(signal.SIGTERM)
            response = await asyncio.wait_for(pending, 5)
            assert response.status == 503
            assert (await response.json())["error"] == "draining"
            assert response.headers["Retry-After"] == "1"
            await asyncio.wait_for(gw.process.wait(), 10)
            never.set()
        elapsed = time.monotonic() - sent
        assert gw.process.returncode == 0
        assert elapsed < 2 + 1.5, elapsed  # drain_timeout_s plus a short grace, not 2 x drain
