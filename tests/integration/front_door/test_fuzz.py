"""Property test: random and mutated bodies and headers never make the front door fail.

The gateway runs in its own thread and event loop (a real aiohttp server on 127.0.0.1), so
hypothesis can drive it synchronously over plain HTTP. Every answer must be a status-table row
or a success: never a 500, never a dropped connection, and never the ``internal_error`` row.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import ipaddress
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.http.endpoint import McpEndpoint
from gateway.http.routes import add_mcp_routes
from gateway.limits.memory import MemoryRateLimiter
from tests.support.fakes import FakeAuthenticator, FakeBackend, FakePolicySource, default_policy
from tests.support.gateway_harness import (
    MODERN,
    RecordingObserver,
    default_tokens,
    harness_config,
    modern_request,
)

ALLOWED_STATUSES = {200, 202, 400, 401, 403, 404, 405, 406, 408, 413, 415, 429, 503}


class LiveGateway:
    def __init__(self) -> None:
        self.observer = RecordingObserver()
        self.backend = FakeBackend()
        self.backend.release.set()  # "slow" answers at once
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)

    async def _start(self) -> None:
        config = dataclasses.replace(
            harness_config(pre_auth_rate=None, principal_rate=None, max_body_bytes=4096),
            # Loopback is a trusted proxy here, so X-Forwarded-For parsing is fuzzed too.
            trusted_proxies=(ipaddress.ip_network("127.0.0.0/8"),),
        )
        policy = default_policy()
        policy.rules.pop("create_ticket")  # its rate limit would turn later examples into 429s
        endpoint = McpEndpoint(
            config=config,
            authenticator=FakeAuthenticator(default_tokens()),
            policy=FakePolicySource(policy),
            backend=self.backend,
            limiter=MemoryRateLimiter(),
            observer=self.observer,
        )
        app = web.Application()
        add_mcp_routes(app, endpoint, config=config, prm_document=lambda: {"resource": "x"})
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def send(self, method: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request(method, "/mcp", body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()


@pytest.fixture(scope="module")
def live() -> Iterator[LiveGateway]:
    gateway = LiveGateway()
    gateway.start()
    yield gateway
    gateway.stop()


SEEDS = [
    modern_request("server/discover", 1),
    modern_request("tools/list", 2, {"cursor": "abc"}),
    modern_request("tools/call", 3, {"name": "echo", "arguments": {"text": "hi"}}),
    modern_request("tools/call", 4, {"name": "region_lookup", "arguments": {"region": "eu"}}),
    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"}}},
    [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "n/x"}],
]  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(
    str.strip
)


@st.composite
def mutated_body(draw: st.DrawFn) -> bytes:
    seed: Any = json.loads(json.dumps(draw(st.sampled_from(SEEDS))))
    kind = draw(st.sampled_from(["json", "bytes", "random"]))
    if kind == "random":
        return draw(st.binary(max_size=300))
    if kind == "json":
        target = seed if isinstance(seed, dict) else seed[0]
        key = draw(st.sampled_from(["id", "method", "params", "jsonrpc", "extra"]))
        target[key] = draw(json_values)
        if isinstance(target.get("params"), dict) and draw(st.booleans()):
            target["params"]["_meta"] = draw(json_values)
        return json.dumps(seed).encode()
    raw = bytearray(json.dumps(seed).encode())
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(0, max(0, len(raw) - 1)))
        action = draw(st.sampled_from(["flip", "insert", "delete"]))
        if action == "flip" and raw:
            raw[position] = draw(st.integers(0, 255))
        elif action == "insert":
            raw[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif raw:
            del raw[position]
    return bytes(raw)


AUTHORIZATION = ["Bearer good", "Bearer ops", "Bearer nope", "Basic x", ""]
CONTENT_TYPES = ["application/json", "text/plain", "application/json; charset=utf-8"]
ACCEPTS = ["application/json, text/event-stream", "*/*", "text/html"]
OPTIONAL_HEADERS = {
    "MCP-Protocol-Version": [MODERN, "2025-06-18", "2025-03-26", "v9"],
    "Mcp-Method": ["server/discover", "tools/list", "tools/call"],
    "Mcp-Name": ["echo", "region_lookup", "=?base64?ZWNobw==?="],
    "Mcp-Param-Region": ["eu", "=?base64?!!?="],
    "Origin": ["https://evil.example"],
    "traceparent": ["00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"],
    "X-Forwarded-For": ["203.0.113.7"],
}


@st.composite
def request_headers(draw: st.DrawFn) -> dict[str, str]:
    headers = {
        "Authorization": draw(st.sampled_from(AUTHORIZATION)),
        "Content-Type": draw(st.sampled_from(CONTENT_TYPES)),
        "Accept": draw(st.sampled_from(ACCEPTS)),
    }
    for name, samples in OPTIONAL_HEADERS.items():
        if draw(st.booleans()):
            headers[name] = draw(st.sampled_from(samples) | header_text)
    return {name: value for name, value in headers.items() if value}


@settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    method=st.sampled_from(["POST"] * 8 + ["GET", "DELETE"]),
    body=mutated_body(),
    headers=request_headers(),
)
def test_random_and_mutated_requests_never_crash_the_front_door(
    live: LiveGateway, method: str, body: bytes, headers: dict[str, str]
) -> None:
    before = len(live.observer.finished)
    status, payload = live.send(method, body, headers)
    assert status in ALLOWED_STATUSES, (status, payload[:200])
    assert len(live.observer.finished) == before + 1
    assert live.observer.finished[-1].error_row != "internal_error"
    if payload and status != 202:
        json.loads(payload)  # every body the gateway writes is JSON
