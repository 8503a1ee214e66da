#!/usr/bin/env python3
"""The whole default pipeline in one process, counted in instructions per call.

One event loop (uvloop, as ``serve`` runs) holds the gateway exactly as ``serve`` wires it
(``build_services`` from a ``gateway.yaml`` at the defaults of ``scripts/bench.py``: access line
and audit event on stdout, the two rate limits off), the development issuer, the bare backend
of ``scripts/bench_backend.py`` and a small keep-alive HTTP/1.1 client sending the benchmark's
2026-07-28 ``tools/call echo`` on ``-c`` connections. After a warm-up, ``-n`` calls are measured.

Each variant is a gateway of its own (``--variants``, comma-separated):

- ``bare``: the client calls the backend directly (what the client and the backend cost);
- ``defaults``: the gateway at the defaults, a cached introspected token;
- ``tuned``: audit off;
- ``jwt``: ``tokens: jwt`` with a Bearer JWT (warm verification cache);
- ``dpop``: the same JWT bound to an ES256 key, a fresh proof per call (``dpop-eddsa``: Ed25519);
- ``tracing``, ``tracing-0.1``: ``tracing:`` at ratio 1.0 and 0.1, exported over OTLP/HTTP to a
  sink in the same process;
- ``conditions``: the ``conditions on the tool`` policy of ``scripts/bench.py``.

With ``--callgrind`` each variant runs under ``valgrind --tool=callgrind`` (a child process per
variant) and the figure is the instructions executed between the start and the end of the
measured calls (``--dump-before`` at two marker calls; startup, warm-up and shutdown are left
out), divided by ``-n``: unlike time on a shared machine, the count does not depend on what else
runs. It includes the backend, the issuer and the client of the same process: compare variants
with each other and with ``bare``. Without ``--callgrind``: CPU time per call (noisy).

Run: ``.venv/bin/python scripts/bench_micro.py pipeline --callgrind --variants defaults,bare``.
Not a test: figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench_backend
from bench import CONDITIONS, call_body, modern_headers, policy

from gateway.app import GatewayServer
from gateway.app.event_loop import run as run_loop
from gateway.app.lifecycle import GC_THRESHOLDS
from gateway.config import load_config
from gateway.dev.dev_issuer import DevIssuer
from gateway.observability.logging import configure
from gateway.wiring.production import build_services
from tests.support.dpop_client import DpopKey

VARIANTS = (
    "bare",
    "defaults",
    "tuned",
    "jwt",
    "dpop",
    "dpop-eddsa",
    "tracing",
    "tracing-0.1",
    "conditions",
)
MARK = os.getppid
"""The marker call: ``--dump-before=getppid`` splits callgrind's counts at each call of it."""


# --- the client ---------------------------------------------------------------------------------


class _Connection(asyncio.Protocol):
    """One keep-alive connection: a request out, its whole answer (Content-Length) in."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._buffer = b""
        self._answer: asyncio.Future[int] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        head_end = self._buffer.find(b"\r\n\r\n")
        if head_end < 0 or self._answer is None:
            return
        head = self._buffer[:head_end].decode("latin-1")
        length = 0
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if len(self._buffer) < head_end + 4 + length:
            return
        self._buffer = self._buffer[head_end + 4 + length :]
        answer, self._answer = self._answer, None
        answer.set_result(int(head.split(" ", 2)[1]))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(exc or ConnectionError("closed"))

    async def send(self, request: bytes) -> int:
        assert self.transport is not None
        self._answer = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self._answer


def http_request(port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines += [
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(body)}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def drive(port: int, requests: Callable[[int], bytes], calls: int, connections: int) -> None:
    """``calls`` requests over ``connections`` connections, each answered 200."""
    loop = asyncio.get_running_loop()
    opened = [
        (await loop.create_connection(_Connection, "127.0.0.1", port))[1]
        for _ in range(connections)
    ]
    counter = iter(range(calls))

    async def worker(connection: _Connection) -> None:
        for index in counter:
            status = await connection.send(requests(index))
            if status != 200:
                raise SystemExit(f"call {index} answered {status}")

    try:
        await asyncio.gather(*(worker(c) for c in opened))
    finally:
        for connection in opened:
            assert connection.transport is not None
            connection.transport.close()


# --- the stack ----------------------------------------------------------------------------------


async def serve_app(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server: Any = site._server  # uvloop's Server is no asyncio.Server subclass
    return runner, int(server.sockets[0].getsockname()[1])


async def otlp_sink() -> tuple[web.AppRunner, int]:
    async def traces(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=b"", content_type="application/x-protobuf")

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    return await serve_app(app)


@contextlib.asynccontextmanager
async def stack(variant: str, work: Path) -> AsyncIterator[tuple[int, str, Callable[[int], bytes]]]:
    """The variant's target (port, path) and its requests (one per call index)."""
    backend, backend_port = await serve_app(bench_backend.app())
    body = json.dumps(call_body(), separators=(",", ":")).encode()
    if variant == "bare":
        try:
            fixed = http_request(backend_port, "/mcp", body, modern_headers(None))
            yield backend_port, "/mcp", lambda _: fixed
        finally:
            await backend.cleanup()
        return
    port = _free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    jwt_variant = variant in ("jwt", "dpop", "dpop-eddsa")
    issuer = DevIssuer(resources=[resource], token_format="jwt" if jwt_variant else "opaque")
    await issuer.start()
    issuer.register_client("mcp-gateway", "bench-gw-secret", can_introspect=True)
    (work / "gw-secret").write_text("bench-gw-secret")
    (work / "svc-token").write_text("bench-service-token")
    when = CONDITIONS if variant == "conditions" else None
    (work / "policy.yaml").write_text(policy(1, when=when))
    config: dict[str, Any] = {
        "resource": resource,
        "listen": {"host": "127.0.0.1", "port": port},
        "ops_listen": {"host": "127.0.0.1", "port": 0},
        "issuer": {
            "url": issuer.url,
            "client_id": "mcp-gateway",
            "client_secret": {"file": str(work / "gw-secret")},
            "allow_insecure_http": True,
        },
        "backend": {
            "url": f"http://127.0.0.1:{backend_port}/mcp",
            "allow_insecure_http": True,
            "credential": {"type": "bearer", "token": {"file": str(work / "svc-token")}},
        },
        "policy": str(work / "policy.yaml"),
        "limits": {"principal_rate": None, "pre_auth_rate": None},
    }
    sink: web.AppRunner | None = None
    key = DpopKey("EdDSA" if variant == "dpop-eddsa" else "ES256")
    if jwt_variant:
        config["issuer"] = {"url": issuer.url, "tokens": "jwt", "allow_insecure_http": True}
    if variant.startswith("dpop"):
        config["issuer"]["dpop"] = {"mode": "required", "iat_window_s": 600}
    if variant == "tuned":
        config["audit"] = {"sink": "off"}
    if variant.startswith("tracing"):
        sink, sink_port = await otlp_sink()
        ratio = 0.1 if variant == "tracing-0.1" else 1.0
        config["tracing"] = {
            "otlp": {"endpoint": f"http://127.0.0.1:{sink_port}"},
            "sample_ratio": ratio,
        }
    (work / "gateway.yaml").write_text(json.dumps(config))
    token = issuer.mint_token(
        sub="bench",
        scopes="mcp:access",
        audience=resource,
        ttl_s=7200,
        jkt=key.jkt if variant.startswith("dpop") else None,
    )
    loaded = load_config(work / "gateway.yaml")
    server = GatewayServer(loaded, build_services(loaded))
    await server.start()
    try:
        while not server.readiness.checks_pass():  # noqa: ASYNC110 - plain callables, no event
            await asyncio.sleep(0.02)
        if variant.startswith("dpop"):
            headers = {**modern_headers(None), "Authorization": f"DPoP {token}"}
            proofs: list[bytes] = []

            def dpop_request(index: int) -> bytes:
                while index >= len(proofs):  # made before the measured calls (see main)
                    proof = key.proof(resource, token=token)
                    proofs.append(http_request(port, "/mcp", body, {**headers, "DPoP": proof}))
                return proofs[index]

            yield port, "/mcp", dpop_request
        else:
            fixed = http_request(port, "/mcp", body, modern_headers(token))
            yield port, "/mcp", lambda _: fixed
    finally:
        await server.stop()
        await issuer.stop()
        await backend.cleanup()
        if sink is not None:
            await sink.cleanup()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def run_variant(
    variant: str, calls: int, warm: int, connections: int, profile: Path | None = None
) -> float:
    """CPU seconds of the measured calls (between the two marker calls)."""
    with tempfile.TemporaryDirectory(prefix="mcp-gw-pipeline-") as folder:
        async with stack(variant, Path(folder)) as (port, _path, requests):
            for index in range(warm + calls):  # every request (and DPoP proof) made in advance
                requests(index)
            await drive(port, requests, warm, connections)
            gc.collect()
            gc.freeze()
            gc.set_threshold(*GC_THRESHOLDS)
            profiler = cProfile.Profile() if profile else None
            MARK()
            started = time.process_time()
            if profiler is not None:
                profiler.enable()
            await drive(port, lambda i: requests(warm + i), calls, connections)
            if profiler is not None:
                profiler.disable()
            used = time.process_time() - started
            MARK()
            if profiler is not None and profile is not None:
                profiler.dump_stats(profile / f"{variant}.pstats")
    return used


# --- callgrind ----------------------------------------------------------------------------------


def counted(variant: str, args: argparse.Namespace) -> float:
    """Instructions per call of ``variant``, in a child process under callgrind."""
    with tempfile.TemporaryDirectory(prefix="mcp-gw-callgrind-") as folder:
        out = Path(folder) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=getppid",
            "--compress-strings=no",  # each part's names in it (callgrind_annotate reads one)
            f"--callgrind-out-file={out}",
            sys.executable,
            str(Path(__file__).resolve()),
            "--variants",
            variant,
            "-n",
            str(args.calls),
            "--warm",
            str(args.warm),
            "-c",
            str(args.connections),
        ]
        subprocess.run(  # noqa: S603
            command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if args.keep:
            kept = Path(args.keep) / f"callgrind.{variant}.out"
            kept.write_bytes(Path(f"{out}.2").read_bytes())
        calls: int = args.calls
        return _total(Path(f"{out}.2")) / calls


def _total(path: Path) -> int:
    for line in path.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit(f"no totals in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--variants", default="defaults,bare", help=f"comma list of {VARIANTS}")
    parser.add_argument("-n", "--calls", type=int, default=2000)
    parser.add_argument("--warm", type=int, default=500)
    parser.add_argument("-c", "--connections", type=int, default=64)
    parser.add_argument("--callgrind", action="store_true", help="count instructions per call")
    parser.add_argument("--keep", metavar="DIR", help="--callgrind: keep each variant's profile")
    parser.add_argument(
        "--profile", metavar="DIR", help="cProfile the measured calls: DIR/<variant>.pstats"
    )
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    if args.callgrind:
        figures = {variant: counted(variant, args) for variant in variants}
        print(f"instructions per call, c{args.connections}, {args.calls} calls:")
        for variant, figure in figures.items():
            extra = ""
            if variant != "defaults" and "defaults" in figures:
                extra += f"  {figure - figures['defaults']:+10,.0f} against defaults"
            if variant != "bare" and "bare" in figures:
                extra += f"  {figure / figures['bare']:5.2f}x bare"
            print(f"  {variant:<12} {figure:>12,.0f}{extra}", flush=True)
        return
    # The gateway's lines go where `make bench` sends them: not to this terminal.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    configure("json", "info")
    for variant in variants:
        profile = Path(args.profile) if args.profile else None
        used = run_loop(
            run_variant(variant, args.calls, args.warm, args.connections, profile), "auto"
        )
        print(
            f"{variant}: {used / args.calls * 1e6:.1f} µs CPU per call (c{args.connections})",
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    main()
