#!/usr/bin/env python3
"""Requests/s of ``mcp-gateway serve --workers 2`` against ``--workers 1`` on this machine.

Everything runs on the same host, which is the point of the exercise and its limit: on a
2-core machine the load generator and the backend share the cores with the workers, so the
figure is a floor for what two workers give on two *dedicated* cores. To keep the shared part
small the backend is a canned-response MCP server on a bare asyncio protocol (no HTTP
framework; about 20 µs per call) and wrk runs one thread.

Setup (the defaults of docs/configuration.md, like the hot-path benchmark of issue 18): access
line and audit event per ``tools/call`` as JSON on stdout, redirected to a file; only the
pre-auth and principal rate limits are off so one token can drive the load; a cached token;
a 2026-07-28 ``tools/call echo``; ``wrk -t1 -c64``. Rounds alternate 1 and 2 workers; medians
are reported, with each process group's CPU (supervisor + workers), the backend's and wrk's.

Usage::

    .venv/bin/python scripts/bench_workers.py --duration 10 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")

PEER = textwrap.dedent(
    r"""
    import asyncio, json, sys
    from gateway.dev.issuer import DevIssuer

    TOOL = {"name": "echo", "description": "Echo", "inputSchema": {
        "type": "object", "properties": {"text": {"type": "string"}}}}
    RESULTS = {
        "server/discover": {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                            "capabilities": {"tools": {}}, "ttlMs": 600000,
                            "cacheScope": "public"},
        "tools/list": {"resultType": "complete", "tools": [TOOL], "ttlMs": 600000,
                       "cacheScope": "public"},
    }

    class Backend(asyncio.Protocol):
        # Just enough HTTP/1.1: keep-alive, Content-Length bodies, one canned answer per method.
        def connection_made(self, transport):
            self.transport, self.buffer = transport, b""

        def data_received(self, data):
            self.buffer += data
            while True:
                head_end = self.buffer.find(b"\r\n\r\n")
                if head_end < 0:
                    return
                head = self.buffer[:head_end].lower()
                start = head.find(b"content-length:")
                end = head.find(b"\r\n", start)
                end = len(head) if end < 0 else end
                length = int(head[start + 15:end]) if start >= 0 else 0
                if len(self.buffer) < head_end + 4 + length:
                    return
                body = self.buffer[head_end + 4:head_end + 4 + length]
                self.buffer = self.buffer[head_end + 4 + length:]
                self.answer(json.loads(body) if body else {})

        def answer(self, message):
            method, rid = message.get("method"), message.get("id")
            if method == "tools/call":
                text = message["params"]["arguments"].get("text", "")
                result = {"resultType": "complete",
                          "content": [{"type": "text", "text": text}]}
                reply, status = {"jsonrpc": "2.0", "id": rid, "result": result}, b"200 OK"
            elif method in RESULTS:
                reply, status = {"jsonrpc": "2.0", "id": rid, "result": RESULTS[method]}, b"200 OK"
            else:
                reply = {"jsonrpc": "2.0", "id": rid,
                         "error": {"code": -32601, "message": "Method not found"}}
                status = b"404 Not Found"
            payload = json.dumps(reply, separators=(",", ":")).encode()
            self.transport.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n"
                b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)

    async def main():
        resource = sys.argv[1]
        issuer = DevIssuer(resources=[resource])
        await issuer.start()
        issuer.register_client("mcp-gateway", "bench-gw-secret", can_introspect=True)
        token = issuer.mint_token(sub="bench", scopes="mcp:access", audience=resource, ttl_s=3600)
        server = await asyncio.get_running_loop().create_server(Backend, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        print(json.dumps({"issuer": issuer.url, "backend": f"http://127.0.0.1:{port}/mcp",
                          "token": token}), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)

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

POLICY = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  echo: {scopes: []}\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all cores, from /proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / CLK_TCK


def readyz(ops_url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(ops_url + "/readyz", timeout=2) as response:  # noqa: S310
            doc: dict[str, Any] = json.loads(response.read())
            return doc if response.status == 200 else None
    except OSError:
        return None


def wait_ready(ops_url: str, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        doc = readyz(ops_url)
        if doc is not None:
            return doc
        time.sleep(0.2)
    raise SystemExit("gateway never became ready")


def wrk(
    url: str, lua: Path, connections: int, duration: int
) -> tuple[subprocess.Popen[str], list[str]]:
    command = [
        "wrk",
        "-t1",
        f"-c{connections}",
        "-d",
        f"{duration}s",
        "--latency",
        "-s",
        str(lua),
        url,
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True), command  # noqa: S603


def parse_wrk(output: str) -> tuple[int, float, str]:
    requests, rate, p50 = 0, 0.0, "?"
    for line in output.splitlines():
        words = line.split()
        if "requests in" in line:
            requests = int(words[0])
        elif line.startswith("Requests/sec:"):
            rate = float(words[1])
        elif words[:1] == ["50%"]:
            p50 = words[1]
        if "Non-2xx" in line or "Socket errors" in line:
            print("WARNING:", line.strip())
    return requests, rate, p50


def run_round(workers: int, args: argparse.Namespace, work: Path, peer: int) -> dict[str, Any]:
    port, ops_port = free_port(), free_port()
    config = work / f"gateway-{workers}.yaml"
    config.write_text(
        json.dumps(
            {
                "resource": args.resource,
                "listen": {"host": "127.0.0.1", "port": port},
                "ops_listen": {"host": "127.0.0.1", "port": ops_port},
                "issuer": {
                    "url": args.issuer,
                    "client_id": "mcp-gateway",
                    "client_secret": {"file": str(work / "gw-secret")},
                    "allow_insecure_http": True,
                },
                "backend": {
                    "url": args.backend,
                    "allow_insecure_http": True,
                    "credential": {"type": "bearer", "token": {"file": str(work / "svc-token")}},
                },
                "policy": str(work / "policy.yaml"),
                "limits": {"principal_rate": None, "pre_auth_rate": None},
            }
        )
    )
    log = (work / f"gateway-{workers}.log").open("ab")
    gateway = subprocess.Popen(  # noqa: S603
        [PYTHON, "-m", "gateway.cli", "serve", "--config", str(config), "--workers", str(workers)],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    log.close()
    try:
        ops_url = f"http://127.0.0.1:{ops_port}"
        try:
            ready = wait_ready(ops_url)
        except SystemExit:
            print((work / f"gateway-{workers}.log").read_text()[-3000:], file=sys.stderr)
            raise
        pids = [gateway.pid] + [w["pid"] for w in ready.get("workers", []) if w.get("pid")]
        url = f"http://127.0.0.1:{port}/mcp"
        warm, _ = wrk(url, work / "call.lua", args.connections, 2)
        warm.communicate(timeout=60)
        before = {
            "gateway": cpu_seconds(pids),
            "backend": cpu_seconds([peer]),
            "machine": machine_busy_seconds(),
        }
        load, _ = wrk(url, work / "call.lua", args.connections, args.duration)
        wrk_cpu = 0.0
        deadline = time.monotonic() + args.duration + 30
        while load.poll() is None and time.monotonic() < deadline:
            wrk_cpu = cpu_seconds([load.pid])  # read before it exits (then /proc is gone)
            time.sleep(0.2)
        output, _ = load.communicate(timeout=30)
        used = {
            "gateway": cpu_seconds(pids) - before["gateway"],
            "backend": cpu_seconds([peer]) - before["backend"],
            "wrk": wrk_cpu,
        }
        # What everything else on the machine took meanwhile (other jobs share the cores).
        used["other"] = max(0.0, machine_busy_seconds() - before["machine"] - sum(used.values()))
        requests, rate, p50 = parse_wrk(output)
        return {"workers": workers, "rps": rate, "requests": requests, "p50": p50, "cpu": used}
    finally:
        gateway.terminate()
        gateway.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10, help="measured seconds per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (1 worker, 2 workers)")
    parser.add_argument("--connections", type=int, default=64)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is required: apt-get install -y wrk")
    work = Path(tempfile.mkdtemp(prefix="mcp-gw-bench-workers-"))
    args.resource = f"http://127.0.0.1:{free_port()}/mcp"
    peer = subprocess.Popen(  # noqa: S603
        [PYTHON, "-c", PEER, args.resource], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert peer.stdout is not None
        info = json.loads(peer.stdout.readline())
        args.issuer, args.backend = info["issuer"], info["backend"]
        (work / "gw-secret").write_text("bench-gw-secret")
        (work / "svc-token").write_text("bench-service-token")
        (work / "policy.yaml").write_text(POLICY)
        body = json.dumps(
            {
                "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {
                    "name": "echo", "arguments": {"text": "hello"},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {},
                        "io.modelcontextprotocol/clientInfo": {"name": "wrk", "version": "1"},
                    },
                },
            },
            separators=(",", ":"),
        )  # fmt: skip
        (work / "call.lua").write_text(LUA % (body, info["token"]))
        results: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        for index in range(args.rounds):
            for workers in (1, 2) if index % 2 == 0 else (2, 1):
                result = run_round(workers, args, work, peer.pid)
                results[workers].append(result)
                cpu = result["cpu"]
                per_call = cpu["gateway"] / max(result["requests"], 1) * 1e6
                print(
                    f"round {index + 1} --workers {workers}: {result['rps']:,.0f} req/s, "
                    f"p50 {result['p50']}, CPU s: gateway {cpu['gateway']:.1f} "
                    f"({per_call:.0f} µs/call), backend {cpu['backend']:.1f}, "
                    f"wrk {cpu['wrk']:.1f}, other processes {cpu['other']:.1f}",
                    flush=True,
                )
        one = statistics.median(r["rps"] for r in results[1])
        two = statistics.median(r["rps"] for r in results[2])
        print(
            f"median: --workers 1 {one:,.0f} req/s, --workers 2 {two:,.0f} req/s: "
            f"{two / one:.2f}x ({os.cpu_count()} CPUs, wrk -t1 -c{args.connections}, "
            f"{args.duration} s rounds, {args.rounds} rounds)"
        )
    finally:
        peer.terminate()
        peer.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
