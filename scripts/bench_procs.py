"""The processes of ``scripts/bench.py``: the bare aiohttp backend, the issuers, gateways, wrk.

Imported by ``scripts/bench.py`` only (the script's folder is on ``sys.path`` when it runs).
Everything binds 127.0.0.1 on free ports; every process started here is stopped by its pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CLK_TCK = os.sysconf("SC_CLK_TCK")
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

BACKEND = ROOT / "scripts" / "bench_backend.py"
"""The bare backend (its own process here)."""

FLOOR = textwrap.dedent(
    r"""
    # The floor of the gateway's design: aiohttp's server (uvloop) and the gateway's lean
    # HTTP/1.1 client forwarding each POST /mcp body to the bare backend, and nothing else (no
    # checks, no logs, no metrics). What any gateway built on these two pieces costs at least.
    import sys
    import uvloop
    from aiohttp import web
    from gateway.outbound.http1 import Http1Pool

    async def make():
        pool = Http1Pool(limit=100, connect_timeout_s=5.0, ssl_context=None, user_agent="floor")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}

        async def handle(request):
            answer = await pool.request("POST", sys.argv[2], headers, await request.read())
            try:
                body = await answer.read()
            finally:
                answer.release()
            return web.Response(body=body, content_type="application/json")

        app = web.Application()
        app.router.add_post("/mcp", handle)
        return app

    uvloop.install()
    web.run_app(make(), host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
    """
)

PEER = textwrap.dedent(
    r"""
    # The issuers: one introspecting (opaque tokens), one minting RFC 9068 JWTs.
    import asyncio, json, sys
    from aiohttp import web
    from gateway.dev.dev_issuer import DevIssuer

    async def main():
        resource = sys.argv[1]
        opaque = DevIssuer(resources=[resource])
        jwt = DevIssuer(resources=[resource], token_format="jwt")
        await opaque.start()
        await jwt.start()
        opaque.register_client("mcp-gateway", "bench-gw-secret", can_introspect=True)
        scopes = "mcp:access"
        info = {
            "issuer": opaque.url, "jwt_issuer": jwt.url,
            "token": opaque.mint_token(sub="bench", scopes=scopes, audience=resource, ttl_s=7200),
            "jwt": jwt.mint_token(sub="bench", scopes=scopes, audience=resource, ttl_s=7200),
            # JWTs bound to the DPoP keys named on the command line (RFC 9449 cnf.jkt).
            "dpop": {
                jkt: jwt.mint_token(sub="bench", scopes=scopes, audience=resource, ttl_s=7200,
                                    jkt=jkt)
                for jkt in sys.argv[2:]
            },
        }

        async def calls(request):  # how many introspections the opaque issuer answered
            return web.json_response({"introspections": opaque.introspection_calls})

        async def traces(request):  # an OTLP/HTTP sink for the tracing variant (features)
            await request.read()
            return web.Response(body=b"", content_type="application/x-protobuf")

        async def evaluation(request):  # an AuthZEN 1.0 decision point that allows (features)
            await request.read()
            return web.json_response({"decision": True})

        async def guardrail(request):  # a guardrail processor that passes everything (features)
            await request.read()
            return web.json_response({"pass": {}})

        app = web.Application()
        app.router.add_get("/calls", calls)
        app.router.add_post("/v1/traces", traces)
        app.router.add_post("/access/v1/evaluation", evaluation)
        app.router.add_post("/guardrail", guardrail)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        info["calls"] = base + "/calls"
        info["otlp"] = base
        info["pdp"] = base + "/access/v1/evaluation"
        info["guardrail"] = base + "/guardrail"
        print(json.dumps(info), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pids: Iterable[int]) -> float:
    """user + system time of ``pids`` from /proc/<pid>/stat (what the issue measures)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all cores, /proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK


def pin(pids: Iterable[int], core: int | None) -> None:
    """Pin ``pids`` to ``core`` (None: every core)."""
    cores = set(range(os.cpu_count() or 1)) if core is None else {core}
    for pid in pids:
        with contextlib.suppress(OSError):  # a worker that is gone
            os.sched_setaffinity(pid, cores)


def get_json(url: str, timeout_s: float = 2.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - loopback
        return json.loads(response.read())


def wait_http(url: str, timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return get_json(url)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[Any]
    extra_pids: list[int] = field(default_factory=list)
    url: str = ""
    ops: str = ""
    warmed: bool = False
    """Served a first warm-up already (see FIRST_WARM_S in bench.py)."""

    @property
    def pids(self) -> list[int]:
        return [self.popen.pid, *self.extra_pids]

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)


def start_backend(port: int, core: int) -> Proc:
    popen = subprocess.Popen([PYTHON, str(BACKEND), str(port)], env=ENV)  # noqa: S603
    pin([popen.pid], core)
    wait_port(port, popen, "the bare backend")
    return Proc("bare backend", popen)


def wait_port(port: int, popen: subprocess.Popen[Any], what: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline or popen.poll() is not None:
                raise SystemExit(f"{what} did not start") from None
            time.sleep(0.1)


def start_floor(port: int, backend_url: str, core: int) -> Proc:
    popen = subprocess.Popen([PYTHON, "-c", FLOOR, str(port), backend_url], env=ENV)  # noqa: S603
    pin([popen.pid], core)
    wait_port(port, popen, "the floor proxy")
    return Proc("floor", popen, url=f"http://127.0.0.1:{port}/mcp")


def start_peer(resource: str, core: int, jkts: Iterable[str] = ()) -> tuple[Proc, dict[str, Any]]:
    """The issuers; ``jkts``: DPoP key thumbprints to mint a bound JWT for (``info["dpop"]``)."""
    popen = subprocess.Popen(  # noqa: S603
        [PYTHON, "-c", PEER, resource, *jkts], stdout=subprocess.PIPE, text=True, env=ENV
    )
    pin([popen.pid], core)
    assert popen.stdout is not None
    info = json.loads(popen.stdout.readline())
    return Proc("issuers", popen), info


def start_gateway(
    name: str,
    config: Mapping[str, Any],
    work: Path,
    *,
    core: int | None,
    stdout: Path | None,
    workers: int = 1,
    extra_env: Mapping[str, str] | None = None,
) -> Proc:
    """``mcp-gateway serve`` with ``config``; stdout to ``stdout`` (a file) or /dev/null."""
    path = work / f"{name}.yaml"
    path.write_text(json.dumps(config))
    out = stdout.open("ab") if stdout is not None else Path(os.devnull).open("wb")  # noqa: SIM115
    env = {**ENV, **(extra_env or {})}
    command = [PYTHON, "-m", "gateway.commands", "serve", "--config", str(path)]
    if workers != 1:
        command += ["--workers", str(workers)]
    if core is not None:
        command = ["taskset", "-c", str(core), *command]
    popen = subprocess.Popen(  # noqa: S603
        command, stdout=out, stderr=subprocess.STDOUT, env=env
    )
    out.close()
    ops = f"http://127.0.0.1:{config['ops_listen']['port']}/readyz"
    deadline = time.monotonic() + 40
    while True:
        try:
            ready = get_json(ops)
            break
        except OSError:
            if popen.poll() is not None or time.monotonic() > deadline:
                popen.kill()
                tail = stdout.read_text()[-2000:] if stdout is not None else ""
                raise SystemExit(f"gateway {name} never became ready\n{tail}") from None
            time.sleep(0.2)
    workers_pids = [w["pid"] for w in ready.get("workers", []) if w.get("pid")]
    port = config["listen"]["port"]
    return Proc(name, popen, workers_pids, f"http://127.0.0.1:{port}/mcp", ops[: -len("/readyz")])


@dataclass
class Load:
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    """Non-2xx answers plus socket errors."""
    cpu_s: float
    """CPU of the measured processes over the run."""
    wrk_cpu_s: float = 0.0
    other_s: float = 0.0
    """CPU the rest of the machine used meanwhile (noise)."""

    @property
    def cpu_per_call_us(self) -> float:
        return self.cpu_s / self.requests * 1e6 if self.requests else float("nan")


def _ms(text: str) -> float:
    units = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}
    for unit in ("us", "ms", "s", "m"):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float("nan")


def run_wrk(
    url: str,
    lua: Path,
    *,
    connections: int,
    duration: float,
    measured: Iterable[int],
    core: int | None,
) -> Load:
    """wrk pinned to ``core`` (None: every core); the CPU of ``measured`` pids over the run."""
    threads = 2 if connections >= 2 else 1
    cores = f"0-{(os.cpu_count() or 1) - 1}" if core is None else str(core)
    command = [
        "taskset",
        "-c",
        cores,
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{duration:g}s",
        "--latency",
        "-s",
        str(lua),
        url,
    ]
    pids = list(measured)
    before, busy = cpu_seconds(pids), machine_busy_seconds()
    popen = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)  # noqa: S603
    wrk_cpu = 0.0
    while popen.poll() is None:
        wrk_cpu = cpu_seconds([popen.pid]) or wrk_cpu  # /proc is gone once it exits
        time.sleep(0.2)
    output, _ = popen.communicate(timeout=30)
    used = cpu_seconds(pids) - before
    requests, rps, p50, p99, errors = 0, 0.0, float("nan"), float("nan"), 0
    for line in output.splitlines():
        words = line.split()
        if "requests in" in line:
            requests = int(words[0])
        elif line.startswith("Requests/sec:"):
            rps = float(words[1])
        elif words[:1] == ["50%"]:
            p50 = _ms(words[1])
        elif words[:1] == ["99%"]:
            p99 = _ms(words[1])
        elif "Non-2xx" in line:
            errors += int(words[-1])
        elif "Socket errors" in line:
            errors += sum(int(w.strip(",")) for w in words[3::2])
    other = max(0.0, machine_busy_seconds() - busy - used - wrk_cpu)
    return Load(requests, rps, p50, p99, errors, used, wrk_cpu, other)
