#!/usr/bin/env python3
"""Front door alone: the MCP endpoint's handler called with prepared requests (no socket, no
HTTP parsing), with the in-process fakes of ``tests/support/fakes.py`` (a dict lookup for the
token, a backend that answers at once). The end-to-end figure is ``scripts/bench.py``.

Run: ``.venv/bin/python scripts/bench_micro.py front_door [-n N] [--rounds R]``. Not a test:
timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from aiohttp import web
from aiohttp.streams import StreamReader
from aiohttp.test_utils import make_mocked_request

from gateway.config import Rate
from gateway.http.pipeline.endpoint import McpEndpoint
from gateway.limits.memory import MemoryRateLimiter
from gateway.observability.metrics import Metrics
from tests.support.fakes import (
    FakeAuthenticator,
    FakeBackend,
    FakePolicySource,
    default_policy,
)
from tests.support.gateway_harness import default_tokens, harness_config, modern_request

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


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("-n", "--requests", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    result = asyncio.run(bench_handler(args.requests, args.rounds))
    print(
        f"front door handler, tools/call echo: {result['median_us']:.1f} µs CPU per request "
        f"(median of {args.rounds} rounds of {args.requests}; min {result['min_us']:.1f} µs)"
    )


if __name__ == "__main__":
    main()
