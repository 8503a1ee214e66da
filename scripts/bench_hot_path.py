#!/usr/bin/env python3
"""Hot-path benchmark of the whole gateway: cached token, ``tools/call`` proxied to a fast backend.

Three processes, so the figure is the gateway's own CPU:

1. a peer process running the development issuer and the demo backend (``gateway.dev``);
2. the gateway itself, started as ``mcp-gateway serve --config <generated gateway.yaml>``
   (production wiring: introspection cache, policy, upstream backend, observer, access log);
3. ``wrk`` posting a modern ``tools/call echo`` with a reader token (one introspection, then
   cache hits).

The gateway's CPU time (user + system from ``/proc/<pid>/stat``) over the measured run divided by
the requests served is "gateway CPU per call". Logs go to /dev/null at the configured level (the
access line is still rendered: it is part of the hot path).

Usage::

    .venv/bin/python scripts/bench_hot_path.py --duration 10 --connections 16

Figures and the exact command are recorded in docs/performance.md ("Hot path").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")

PEER = textwrap.dedent(
    """
    import asyncio, json, sys
    from gateway.dev.issuer import DevIssuer
    from gateway.dev.demo_backend import DemoBackend

    async def main() -> None:
        resource = sys.argv[1]
        issuer = DevIssuer(resources=[resource])
        backend = DemoBackend(service_token="bench-service-token")
        await issuer.start()
        await backend.start()
        issuer.register_client("mcp-gateway", "bench-gw-secret", can_introspect=True)
        token = issuer.mint_token(sub="bench", scopes="mcp:access notes:read", audience=resource)
        info = {"issuer": issuer.url, "backend": backend.url, "token": token}
        print(json.dumps(info), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)

BARE_HOP = textwrap.dedent(
    """
    import asyncio, sys
    import aiohttp
    from aiohttp import web

    async def main() -> None:
        backend, port = sys.argv[1], int(sys.argv[2])
        session = aiohttp.ClientSession()
        headers = {
            "Authorization": "Bearer bench-service-token", "Content-Type": "application/json",
            "Accept": "application/json", "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call", "Mcp-Name": "echo",
        }

        async def handle(request: web.Request) -> web.Response:
            body = await request.read()
            async with session.post(backend, data=body, headers=headers) as reply:
                data = await reply.read()
            return web.Response(body=data, content_type="application/json")

        app = web.Application()
        app.router.add_post("/mcp", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)
"""The floor: an aiohttp server that forwards the body to the backend with an aiohttp client
and relays the reply (no auth, no validation, no logging) - "a bare aiohttp hop"."""

LUA = textwrap.dedent(
    """
    wrk.method = "POST"
    wrk.body = [[%s]]
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["Accept"] = "application/json, text/event-stream"
    wrk.headers["Authorization"] = "Bearer %s"
    wrk.headers["MCP-Protocol-Version"] = "2026-07-28"
    wrk.headers["Mcp-Method"] = "tools/call"
    wrk.headers["Mcp-Name"] = "echo"
    """
)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wait_ready(ops_url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(ops_url + "/readyz", timeout=1) as response:  # noqa: S310
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("gateway never became ready")


def measure(
    pid: int, url: str, work: Path, args: argparse.Namespace, *, profile: str | None
) -> tuple[float, int, str]:
    """Warm up, run wrk for ``args.duration`` s; return (CPU s of ``pid``, requests, output)."""
    wrk = ["wrk", "-t1", f"-c{args.connections}", "-s", str(work / "call.lua"), url]
    subprocess.run([*wrk, "-d2s"], check=True, capture_output=True)  # noqa: S603 warm-up
    spy = None
    if profile:
        spy = subprocess.Popen(  # noqa: S603
            [str(Path(PYTHON).parent / "py-spy"), "record", "--format", "raw", "-o", profile,
             "--pid", str(pid), "-d", str(args.duration)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    before = cpu_seconds(pid)
    run = subprocess.run(  # noqa: S603
        [*wrk, f"-d{args.duration}s", "--latency"], check=True, capture_output=True, text=True
    )
    used = cpu_seconds(pid) - before
    if spy is not None:
        spy.wait(timeout=30)
    requests = 0
    for line in run.stdout.splitlines():
        if "requests in" in line:
            requests = int(line.strip().split()[0])
        if "Non-2xx" in line or "Socket errors" in line:
            print("WARNING:", line.strip())
    return used, requests, run.stdout


def report(name: str, used: float, requests: int) -> None:
    per_call = f"{used / requests * 1e6:.0f} µs" if requests else "n/a"
    print(f"{name}: {requests} requests, {used:.2f} s CPU, {per_call} CPU per call")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="measured seconds")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--port", type=int, default=18931)
    parser.add_argument("--ops-port", type=int, default=18932)
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also measure a bare aiohttp hop to the same backend under the same load",
    )
    parser.add_argument("--repeat", type=int, default=1, help="measured runs (medians reported)")
    parser.add_argument(
        "--profile", metavar="PATH", help="also record collapsed stacks with py-spy to PATH"
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is required: apt-get install -y wrk")

    resource = f"http://127.0.0.1:{args.port}/mcp"
    work = Path(tempfile.mkdtemp(prefix="mcp-gw-bench-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    peer = subprocess.Popen(  # noqa: S603
        [PYTHON, "-c", PEER, resource], stdout=subprocess.PIPE, text=True, env=env
    )
    gateway = None
    try:
        assert peer.stdout is not None
        info = json.loads(peer.stdout.readline())
        (work / "gw-secret").write_text("bench-gw-secret")
        (work / "svc-token").write_text("bench-service-token")
        (work / "gateway.yaml").write_text(
            textwrap.dedent(
                f"""
                resource: {resource}
                listen: {{host: 127.0.0.1, port: {args.port}}}
                ops_listen: {{host: 127.0.0.1, port: {args.ops_port}}}
                issuer:
                  url: {info["issuer"]}
                  client_id: mcp-gateway
                  client_secret: {{file: gw-secret}}
                  allow_insecure_http: true
                backend:
                  url: {info["backend"]}
                  allow_insecure_http: true
                  credential: {{type: bearer, token: {{file: svc-token}}}}
                policy: {ROOT / "gateway" / "dev" / "demo-policy.yaml"}
                limits: {{principal_rate: null, pre_auth_rate: null, max_in_flight: 4096}}
                audit: {{sink: off}}
                """
            )
        )
        gateway = subprocess.Popen(  # noqa: S603
            [PYTHON, "-m", "gateway.cli", "serve", "--config", str(work / "gateway.yaml")],
            stdout=subprocess.DEVNULL,
            env=env,
        )
        wait_ready(f"http://127.0.0.1:{args.ops_port}")
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {
                    "name": "echo",
                    "arguments": {"text": "hello"},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {},
                        "io.modelcontextprotocol/clientInfo": {"name": "wrk", "version": "1"},
                    },
                },
            },
            separators=(",", ":"),
        )
        (work / "call.lua").write_text(LUA % (body, info["token"]))
        url = f"http://127.0.0.1:{args.port}/mcp"
        bare = None
        if args.baseline:
            bare = subprocess.Popen(  # noqa: S603
                [PYTHON, "-c", BARE_HOP, info["backend"], str(args.port + 10)], env=env
            )
            time.sleep(1.0)
        gateway_runs: list[float] = []
        bare_runs: list[float] = []
        try:
            for _ in range(args.repeat):
                used, requests, output = measure(gateway.pid, url, work, args, profile=args.profile)
                if args.repeat == 1:
                    print(output)
                report("gateway", used, requests)
                gateway_runs.append(used / max(requests, 1))
                if bare is not None:
                    bare_url = f"http://127.0.0.1:{args.port + 10}/mcp"
                    b_used, b_requests, _ = measure(bare.pid, bare_url, work, args, profile=None)
                    report("bare aiohttp hop", b_used, b_requests)
                    bare_runs.append(b_used / max(b_requests, 1))
        finally:
            if bare is not None:
                bare.terminate()
                bare.wait(timeout=15)
        median = statistics.median(gateway_runs)
        print(f"median gateway CPU per call: {median * 1e6:.0f} µs over {args.repeat} run(s)")
        if bare_runs:
            ratios = sorted(g / b for g, b in zip(gateway_runs, bare_runs, strict=True))
            print(
                f"median bare-hop CPU per call: {statistics.median(bare_runs) * 1e6:.0f} µs; "
                f"gateway / bare hop: median {statistics.median(ratios):.2f}x "
                f"(runs {', '.join(f'{r:.2f}' for r in ratios)}; budget 250 / 90 = 2.78x)"
            )
    finally:
        for process in (gateway, peer):
            if process is not None:
                process.terminate()
                process.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
