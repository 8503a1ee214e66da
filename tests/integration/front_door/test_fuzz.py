"""Property test: random and mutated bodies and headers never make the front door fail.

The gateway runs in its own thread and event loop (a real aiohttp server on 127.0.0.1, served by
the production listener ``gateway.app.server.ListenerRunner``), so hypothesis can drive it
synchronously: over plain HTTP (``http.client``) for mutated bodies and headers, including
``Content-Encoding``, and over raw sockets for what a client library refuses to send (malformed
request lines, obsolete line folding, broken framing). Every answer must be a status-table row or
a success: never a 5xx, never a dropped connection, never the ``internal_error`` row, and the
captured log (structlog and the standard library, aiohttp's own logger included) holds no
ERROR line and no traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import http.client
import ipaddress
import json
import logging
import socket
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import LogCapture

from gateway.app.connection_limits import ListenerLimits
from gateway.app.server import ListenerRunner
from gateway.http.pipeline.endpoint import McpEndpoint
from gateway.http.pipeline.routes import add_mcp_routes
from gateway.limits.memory import MemoryRateLimiter
from tests.support.fakes import FakeAuthenticator, FakeBackend, FakePolicySource, default_policy
from tests.support.gateway_harness import (
    MODERN,
    RecordingObserver,
    default_tokens,
    harness_config,
    modern_request,
)

ALLOWED_STATUSES = {200, 202, 400, 401, 403, 404, 405, 406, 408, 413, 415, 429, 431}
"""No 5xx at all: nothing a client sends may look like a gateway fault."""


class CapturedLog:
    """Every structlog event and stdlib record while the module runs (all threads)."""

    def __init__(self) -> None:
        self.structured = LogCapture()
        self.records: list[logging.LogRecord] = []
        self._handler = logging.Handler()
        self._handler.emit = self.records.append  # type: ignore[method-assign]

    def start(self) -> None:
        structlog.configure(processors=[self.structured])
        root = logging.getLogger()
        root.addHandler(self._handler)
        self._level = root.level
        root.setLevel(logging.DEBUG)

    def stop(self) -> None:
        structlog.reset_defaults()
        root = logging.getLogger()
        root.removeHandler(self._handler)
        root.setLevel(self._level)

    def faults(self) -> list[Any]:
        """ERROR lines and tracebacks: there must be none."""
        found: list[Any] = [
            e
            for e in self.structured.entries
            if e.get("log_level") in {"error", "critical", "exception"} or e.get("exc_info")
        ]
        found += [r for r in self.records if r.levelno >= logging.ERROR or r.exc_info]
        return found


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
            harness_config(
                pre_auth_rate=None,
                principal_rate=None,
                max_body_bytes=4096,
                header_timeout_s=2.0,
                request_deadline_s=2.0,
            ),
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
        self._runner = ListenerRunner(app, limits=ListenerLimits.from_config(config))
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

    def send_raw(self, data: bytes) -> tuple[int, dict[str, str], bytes]:
        """Write ``data`` as is; read one response (framed by Content-Length, else to EOF)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            # Answered and closed while we were still sending: read the answer.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(data)
            raw = b""
            while b"\r\n\r\n" not in raw:
                chunk = sock.recv(65536)
                assert chunk, ("connection closed without an answer", data[:200], raw)
                raw += chunk
            head, _, body = raw.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "-1"))
            while length >= 0 and len(body) < length:
                chunk = sock.recv(65536)
                assert chunk, "connection closed in the middle of the answer"
                body += chunk
            return int(lines[0].split(" ", 2)[1]), headers, body[: max(length, 0)]


# One worker starts the live gateway (the module fixtures) for every test here.
pytestmark = pytest.mark.xdist_group("fuzz")


@pytest.fixture(scope="module")
def log() -> Iterator[CapturedLog]:
    captured = CapturedLog()
    captured.start()
    yield captured
    captured.stop()


@pytest.fixture(scope="module")
def live(log: CapturedLog) -> Iterator[LiveGateway]:
    gateway = LiveGateway()
    gateway.start()
    yield gateway
    gateway.stop()


SEEDS = [
    modern_request("server/discover", 1),
    modern_request("tools/list", 2, {"cursor": "abc"}),
    modern_request("tools/call", 3, {"name": "echo", "arguments": {"text": "hi"}}),
    modern_request("tools/call", 4, {"name": "region_lookup", "arguments": {"region": "eu"}}),
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "x", "version": "1"},
        },
    },
    [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "method": "n/x"}],
]

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
    "Content-Encoding": ["gzip", "deflate", "br", "identity", "gzip, identity", "zstd"],
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
    live: LiveGateway, log: CapturedLog, method: str, body: bytes, headers: dict[str, str]
) -> None:
    coding = headers.get("Content-Encoding", "").split(",")[0].strip()
    if coding == "gzip" and len(body) % 2:
        body = gzip.compress(body)  # half of them correctly encoded: still refused (415)
    elif coding == "deflate" and len(body) % 2:
        body = zlib.compress(body)
    before = len(live.observer.finished)
    status, payload = live.send(method, body, headers)
    assert status in ALLOWED_STATUSES, (status, payload[:200])
    assert len(live.observer.finished) == before + 1
    assert live.observer.finished[-1].error_row != "internal_error"
    if payload and status != 202:
        json.loads(payload)  # every body the gateway writes is JSON
    assert not log.faults()


# --- raw bytes: what http.client refuses to send ----------------------------------------------

GOOD_HEAD = [
    ("Host", "127.0.0.1"),
    ("Authorization", "Bearer good"),
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
    ("MCP-Protocol-Version", MODERN),
    ("Mcp-Method", "server/discover"),
]
FOLDED_SECRET = "tok-fuzz-folded-5e2d"
REQUEST_LINES = [
    "POST /mcp HTTP/1.1",
    "POST /mcp HTTP/1.0",
    "POST /mcp HTTP/2.0",
    "POST /mcp HTTP/1.1 x",
    "P@ST /mcp HTTP/1.1",
    "post /mcp HTTP/1.1",
    "POST  /mcp HTTP/1.1",
    "POST\t/mcp HTTP/1.1",
    "POST /mcp",
    "POST",
    "",
    "GARBAGE",
    "\x00POST /mcp HTTP/1.1",
    "POST /m\x7fcp HTTP/1.1",
    "POST /mcp?access_token=x HTTP/1.1",
    "POST http://127.0.0.1/mcp HTTP/1.1",
    "POST /mcp#frag HTTP/1.1",
    "POST /%00 HTTP/1.1",
    "PRI * HTTP/2.0",
    "POST /mcp HTTP/1.1\rX",
    "GET /mcp HTTP/1.1",
    "DELETE /mcp HTTP/1.1",
]
HEADER_MUTATIONS = [
    "none",
    "fold the token",
    "fold with a tab",
    "fold an empty value",
    "bare LF endings",
    "space before colon",
    "no colon",
    "NUL in a value",
    "CR in a value",
    "non-ASCII name",
    "two Content-Length",
    "Content-Length and chunked",
    "bad chunk size",
    "chunked then close",
    "gzip garbage",
    "huge header line",
    "many headers",
    "empty name",
    "leading whitespace line",
]


def _mutate(head: list[tuple[str, str]], mutation: str, body: bytes) -> tuple[list[str], bytes]:
    """Header lines (without line endings) and the body to send for ``mutation``."""
    lines = [f"{name}: {value}" for name, value in head]
    framing = [f"Content-Length: {len(body)}", "Connection: close"]
    if mutation == "fold the token":
        lines[1] = "Authorization: Bearer\r\n " + FOLDED_SECRET
    elif mutation == "fold with a tab":
        lines[1] = "Authorization: Bearer tok-\r\n\t" + FOLDED_SECRET
    elif mutation == "fold an empty value":
        lines.append("X-Note:\r\n  continued")
    elif mutation == "space before colon":
        lines.append("X-Note : v")
    elif mutation == "no colon":
        lines.append("X-Note-No-Colon")
    elif mutation == "NUL in a value":
        lines.append("X-Note: a\x00b")
    elif mutation == "CR in a value":
        lines.append("X-Note: a\rb")
    elif mutation == "non-ASCII name":
        lines.append("X-Nöte: v")
    elif mutation == "two Content-Length":
        framing = [f"Content-Length: {len(body)}", f"Content-Length: {len(body) + 1}"]
    elif mutation == "Content-Length and chunked":
        framing = [f"Content-Length: {len(body)}", "Transfer-Encoding: chunked"]
    elif mutation == "bad chunk size":
        framing = ["Transfer-Encoding: chunked", "Connection: close"]
        body = b"zz\r\n" + body + b"\r\n0\r\n\r\n"
    elif mutation == "chunked then close":
        framing = ["Transfer-Encoding: chunked", "Connection: close"]
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
    elif mutation == "gzip garbage":
        lines.append("Content-Encoding: gzip")
    elif mutation == "huge header line":
        lines.append("X-Big: " + "a" * 17_000)
    elif mutation == "many headers":
        lines += [f"X-Many-{n}: v" for n in range(130)]
    elif mutation == "empty name":
        lines.append(": v")
    elif mutation == "leading whitespace line":
        lines.insert(1, " X-Leading: v")
    return lines + framing, body


@st.composite
def raw_request(draw: st.DrawFn) -> bytes:
    request_line = draw(st.sampled_from(REQUEST_LINES))
    mutation = draw(st.sampled_from(HEADER_MUTATIONS))
    body = json.dumps(modern_request("server/discover", draw(st.integers(0, 9)))).encode()
    if draw(st.booleans()):
        body = draw(mutated_body())
    lines, body = _mutate(list(GOOD_HEAD), mutation, body)
    ending = "\n" if mutation == "bare LF endings" else "\r\n"
    head = ending.join([request_line, *lines]) + ending + ending
    return head.encode("utf-8", "surrogateescape") + body


@settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=raw_request())
def test_malformed_request_lines_and_folded_headers_never_crash_the_front_door(
    live: LiveGateway, log: CapturedLog, data: bytes
) -> None:
    status, headers, payload = live.send_raw(data)
    assert status in ALLOWED_STATUSES, (status, payload[:200], data[:200])
    if status == 404:
        return  # a path that is not the MCP path: aiohttp's router answered
    assert headers.get("cache-control") == "no-store", (status, headers, data[:200])
    if payload and status != 202:
        json.loads(payload)  # never aiohttp's plain-text 400
    assert FOLDED_SECRET.encode() not in payload
    assert not log.faults(), log.faults()[:3]


def test_no_log_line_holds_a_folded_token(live: LiveGateway, log: CapturedLog) -> None:
    for mutation in ("fold the token", "fold with a tab"):
        lines, body = _mutate(list(GOOD_HEAD), mutation, b"{}")
        status, _, _ = live.send_raw(
            ("\r\n".join(["POST /mcp HTTP/1.1", *lines]) + "\r\n\r\n").encode() + body
        )
        assert status == 400
    # The capture sees the listener's lines (so the absence checks above mean something).
    refused = [e for e in log.structured.entries if e.get("event") == "http.refused"]
    assert refused and {e["reason"] for e in refused} >= {"BadHttpMessage"}
    dumped = json.dumps(log.structured.entries, default=str)
    dumped += "".join(record.getMessage() + repr(record.args) for record in log.records)
    assert FOLDED_SECRET not in dumped
