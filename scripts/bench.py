#!/usr/bin/env python3
"""Front-door benchmark: gateway CPU per MCP request (admission + decode + validate + dispatch).

Two measurements, both with the in-process fakes of ``tests/support/fakes.py`` (a dict lookup for
the token, the way a cached introspection result behaves, and a backend that answers at once):

1. ``handler``: the endpoint's handler called directly with prepared requests, so the figure
   excludes HTTP parsing and socket I/O: this is the front door's own cost.
2. ``http``: a real aiohttp server in a child process under load from ``wrk`` (POST via a Lua
   script), or from an aiohttp load generator when ``wrk`` is missing. The server's CPU time
   (user + system, from ``/proc/<pid>/stat``) divided by the requests served gives the whole
   process's CPU per request, aiohttp's HTTP handling included.

Usage::

    .venv/bin/python scripts/bench.py                 # both, default sizes
    .venv/bin/python scripts/bench.py handler -n 20000
    .venv/bin/python scripts/bench.py http --duration 10 --connections 32

Figures and the exact commands are recorded in docs/performance.md ("Front door").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402
from aiohttp.streams import StreamReader  # noqa: E402
from aiohttp.test_utils import make_mocked_request  # noqa: E402

from gateway.config import Rate  # noqa: E402
from gateway.http.endpoint import McpEndpoint  # noqa: E402
from gateway.http.routes import add_mcp_routes  # noqa: E402
from gateway.limits.memory import MemoryRateLimiter  # noqa: E402
from gateway.observability.metrics import Metrics  # noqa: E402
from tests.support.fakes import (  # noqa: E402
    FakeAuthenticator,
    FakeBackend,
    FakePolicySource,
    default_policy,
)
from tests.support.gateway_harness import default_tokens, harness_config, modern_request  # noqa: E402

CALL = modern_request("tools/call", 42, {"name": "echo", "arguments": {"text": "hello"}})
CALL_BODY = json.dumps(CALL, separators=(",", ":")).encode()
CALL_HEADERS = {
    "Host": "127.0.0.1",
    "Authorization": "Bearer good",
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "echo",
    "Content-Length": str(len(CALL_BODY)),
}


def build_endpoint() -> McpEndpoint:
    # The production rate limits stay on (memory limiter, budgets too large to trip), and the
    # Prometheus metrics are recorded, so the figure includes their cost.
    config = harness_config(
        pre_auth_rate=Rate(10**9, 60.0), principal_rate=Rate(10**9, 60.0), max_in_flight=10_000
    )
    return McpEndpoint(
        config=config,
        authenticator=FakeAuthenticator(default_tokens()),
        policy=FakePolicySource(default_policy()),
        backend=FakeBackend(),
        limiter=MemoryRateLimiter(),
        metrics=Metrics(),
    )


# --- 1. handler-only --------------------------------------------------------------------------


class _Protocol:
    """The least a StreamReader needs from its protocol (no flow control in a benchmark)."""

    _reading_paused = False

    def pause_reading(self) -> None: ...

    def resume_reading(self, resume_parser: bool = True) -> None: ...


class _Transport:
    """A transport that knows its peer, like a real socket transport (mocks cost ~20 µs)."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def is_closing(self) -> bool:
        return False


async def bench_handler(requests: int, rounds: int) -> dict[str, Any]:
    endpoint = build_endpoint()
    loop = asyncio.get_running_loop()
    protocol = _Protocol()
    transport = _Transport()

    def prepared() -> web.Request:
        payload = StreamReader(protocol, 2**16, loop=loop)  # type: ignore[arg-type]
        payload.feed_data(CALL_BODY)
        payload.feed_eof()
        return make_mocked_request(
            "POST", "/mcp", headers=CALL_HEADERS, payload=payload, transport=transport
        )

    # Warm up (imports, caches, JIT-less but allocator warm).
    for _ in range(500):
        response = await endpoint.handle(prepared())
        assert response.status == 200, response.status
    per_request: list[float] = []
    for _ in range(rounds):
        batch = [prepared() for _ in range(requests)]
        started = time.process_time()
        for request in batch:
            await endpoint.handle(request)
        per_request.append((time.process_time() - started) / requests)
    return {
        "requests_per_round": requests,
        "rounds": rounds,
        "median_us": statistics.median(per_request) * 1e6,
        "min_us": min(per_request) * 1e6,
    }


# --- 2. over HTTP -----------------------------------------------------------------------------


def serve(port_file: str) -> None:
    """Child process: serve the front door on 127.0.0.1:0 and write the port to ``port_file``."""

    async def main() -> None:
        app = web.Application()
        add_mcp_routes(app, build_endpoint(), config=harness_config(), prm_document=None)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        Path(port_file).write_text(str(port))  # noqa: ASYNC240 - once, before serving
        await asyncio.Event().wait()

    asyncio.run(main())


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


WRK_LUA = """
wrk.method = "POST"
wrk.body = {body}
wrk.headers["Authorization"] = "Bearer good"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
wrk.headers["Mcp-Method"] = "tools/call"
wrk.headers["Mcp-Name"] = "echo"
responses = {{}}
response = function(status, headers, body)
  if status ~= 200 then error("unexpected status " .. status) end
end
"""


def _lua_string(data: bytes) -> str:
    return "'" + data.decode().replace("\\", "\\\\").replace("'", "\\'") + "'"


async def _aiohttp_load(url: str, duration: float, connections: int) -> int:
    done = 0
    stop = time.monotonic() + duration
    headers = {k: v for k, v in CALL_HEADERS.items() if k not in {"Host", "Content-Length"}}

    async def worker(session: aiohttp.ClientSession) -> None:  # noqa: TID251 - load generator
        nonlocal done
        while time.monotonic() < stop:
            async with session.post(url, data=CALL_BODY, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    raise RuntimeError(f"unexpected status {response.status}")
            done += 1

    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:  # noqa: TID251 - load generator
        await asyncio.gather(*(worker(session) for _ in range(connections)))
    return done


def bench_http(duration: float, connections: int, threads: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        child = subprocess.Popen(  # noqa: S603 - our own interpreter and script
            [sys.executable, __file__, "serve", "--port-file", str(port_file)]
        )
        try:
            for _ in range(200):
                if port_file.exists() and port_file.read_text():
                    break
                time.sleep(0.05)
            port = int(port_file.read_text())
            url = f"http://127.0.0.1:{port}/mcp"
            wrk = shutil.which("wrk")
            # Warm-up so the first-request costs are not counted.
            asyncio.run(_aiohttp_load(url, 1.0, 4))
            cpu_before = _cpu_seconds(child.pid)
            if wrk is not None:
                script = Path(tmp) / "post.lua"
                script.write_text(WRK_LUA.format(body=_lua_string(CALL_BODY)))
                command = [wrk, f"-t{threads}", f"-c{connections}", f"-d{int(duration)}s",
                           "--latency", "-s", str(script), url]  # fmt: skip
                output = subprocess.run(  # noqa: S603
                    command, check=True, capture_output=True, text=True
                ).stdout
                requests = int(output.split(" requests in ")[0].split()[-1])
                tool = "wrk " + " ".join(command[1:5])
                latency = {
                    line.split()[0]: line.split()[1]
                    for line in output.splitlines()
                    if line.strip().startswith(("50%", "90%", "99%"))
                }
            else:
                requests = asyncio.run(_aiohttp_load(url, duration, connections))
                tool = f"aiohttp load generator, {connections} connections"
                latency = {}
            cpu = _cpu_seconds(child.pid) - cpu_before
        finally:
            child.terminate()
            child.wait(timeout=10)
    return {
        "tool": tool,
        "requests": requests,
        "duration_s": duration,
        "requests_per_s": requests / duration,
        "server_cpu_s": cpu,
        "server_cpu_us_per_request": cpu / requests * 1e6 if requests else float("nan"),
        "latency": latency,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode")
    handler = sub.add_parser("handler")
    handler.add_argument("-n", "--requests", type=int, default=10_000)
    handler.add_argument("--rounds", type=int, default=5)
    http = sub.add_parser("http")
    http.add_argument("--duration", type=float, default=10.0)
    http.add_argument("--connections", type=int, default=32)
    http.add_argument("--threads", type=int, default=1)
    serve_parser = sub.add_parser("serve")
    serve_parser.add_argument("--port-file", required=True)
    args = parser.parse_args()
    if args.mode == "serve":
        serve(args.port_file)
        return
    results: dict[str, Any] = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    if args.mode in (None, "handler"):
        n = getattr(args, "requests", 10_000)
        rounds = getattr(args, "rounds", 5)
        results["handler"] = asyncio.run(bench_handler(n, rounds))
    if args.mode in (None, "http"):
        results["http"] = bench_http(
            getattr(args, "duration", 10.0),
            getattr(args, "connections", 32),
            getattr(args, "threads", 1),
        )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
