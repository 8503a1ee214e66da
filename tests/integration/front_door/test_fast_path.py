"""The MCP path's short way through aiohttp (gateway/app/fast_path.py), byte for byte.

The lane (the route without aiohttp's router) and the plain write (an answer without aiohttp's
response machinery) must be invisible to a client: the same status line, headers and body as
aiohttp's own path, for every HTTP version and keep-alive choice, and the same connection
handling after the answer. The reference is aiohttp's path through the same listener, taken by
switching the plain write off (``write_plain`` returning "not mine") and by a request the lane
leaves to the router.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from aiohttp import web

from gateway.app import fast_path, listener
from gateway.config import CorsConfig
from tests.integration.front_door.conftest import MakeGateway
from tests.support.gateway_harness import (
    Gateway,
    harness_config,
    modern_headers,
    modern_request,
)

CALL = json.dumps(
    modern_request("tools/call", 7, {"name": "echo", "arguments": {"text": "hi"}})
).encode()
DISCOVER = json.dumps(modern_request("server/discover", 1)).encode()


def raw_request(
    *,
    method: str = "POST",
    target: str = "/mcp",
    version: str = "1.1",
    body: bytes = CALL,
    headers: dict[str, str] | None = None,
    connection: str | None = None,
) -> bytes:
    fields = {**modern_headers("tools/call", "echo"), **(headers or {})}
    lines = [f"{method} {target} HTTP/{version}", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in fields.items() if value]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    if connection is not None:
        lines.append(f"Connection: {connection}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def answer(port: int, data: bytes) -> tuple[bytes, bool]:
    """The raw answer (status line, headers with Date blanked, body) and whether the server
    closed the connection after it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        async with asyncio.timeout(5):
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            body = await reader.readexactly(length)
            try:
                async with asyncio.timeout(0.3):
                    closed = await reader.read(1) == b""
            except TimeoutError:
                closed = False
    finally:
        writer.close()
    lines = [b"Date: -" if line.startswith(b"Date:") else line for line in head.split(b"\r\n")]
    return b"\r\n".join(lines) + body, closed


CASES: dict[str, dict[str, Any]] = {
    "200 keep-alive": {},
    "200 close": {"connection": "close"},
    "200 HTTP/1.0": {"version": "1.0"},
    "200 HTTP/1.0 keep-alive": {"version": "1.0", "connection": "keep-alive"},
    "401 no token": {"headers": {"Authorization": ""}},
    "401 HTTP/1.0": {"version": "1.0", "headers": {"Authorization": ""}},
    "403 scope": {"headers": {"Authorization": "Bearer basic"}},
    "405 GET": {"method": "GET", "body": b""},
    "406 accept": {"headers": {"Accept": "text/html"}},
    "413 body": {"body": b"[" + b" " * 70_000 + b"]"},
    "202 notification": {
        "body": json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
        "headers": {"MCP-Protocol-Version": "2025-06-18", "Mcp-Method": "", "Mcp-Name": ""},
    },
}


async def _as_aiohttp_answers(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch, request: dict[str, Any]
) -> Any:
    """The gateway's plain-write answer to ``request``, after checking it is byte for byte
    aiohttp's own (the same request again with the plain write switched off)."""
    port = gw.server.port
    assert port is not None
    data = raw_request(**request)
    ours = await answer(port, data)
    monkeypatch.setattr(listener, "write_plain", _not_plain)
    assert ours == await answer(port, data)
    return ours


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
async def test_the_plain_write_answers_as_aiohttp_does(
    make_gw: MakeGateway, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    ours = await _as_aiohttp_answers(await make_gw(), monkeypatch, CASES[case])
    assert ours[0].startswith(b"HTTP/1.")


CORS_CASES: dict[str, dict[str, Any]] = {
    "200 trusted origin": {"headers": {"Origin": "https://app.example.com"}},
    "401 trusted origin": {"headers": {"Origin": "https://app.example.com", "Authorization": ""}},
    "200 no origin": {},
    "403 untrusted origin": {"headers": {"Origin": "https://evil.example"}},
}


@pytest.mark.parametrize("case", CORS_CASES, ids=list(CORS_CASES))
async def test_the_plain_write_carries_the_cors_headers_as_aiohttp_does(
    make_gw: MakeGateway, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    config = dataclasses.replace(
        harness_config(),
        allowed_origins=frozenset({"https://app.example.com"}),
        cors=CorsConfig(enabled=True),
    )
    ours = await _as_aiohttp_answers(await make_gw(config=config), monkeypatch, CORS_CASES[case])
    assert b"\r\nVary: Origin\r\n" in ours[0]
    trusted = b"Access-Control-Allow-Origin: https://app.example.com\r\n" in ours[0]
    assert trusted == (case.split()[1] == "trusted")


async def _not_plain(request: web.BaseRequest, response: web.StreamResponse) -> bool | None:
    return None


async def test_the_plain_write_is_taken_for_endpoint_answers(
    make_gw: MakeGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken: list[bool | None] = []
    original = fast_path.write_plain

    async def counting(request: web.BaseRequest, response: web.StreamResponse) -> bool | None:
        result = await original(request, response)
        taken.append(result)
        return result

    monkeypatch.setattr(listener, "write_plain", counting)
    gw = await make_gw()
    port = gw.server.port
    assert port is not None
    await answer(port, raw_request())  # 200
    await answer(port, raw_request(headers={"Authorization": ""}))  # 401
    await answer(port, raw_request(method="GET", body=b""))  # 405: aiohttp writes it
    assert taken == [False, False, None]


@pytest.mark.parametrize(
    ("target", "extra"),
    [
        ("/mcp?probe=1", {}),  # a query string: the router's way
        ("/mcp", {"Expect": "x-unknown"}),  # an expectation: the router's way (its handler)
    ],
)
async def test_the_router_gives_the_lanes_answer(
    make_gw: MakeGateway, target: str, extra: dict[str, str]
) -> None:
    gw = await make_gw()
    port = gw.server.port
    assert port is not None
    lane = await answer(port, raw_request(headers={"Authorization": ""}))
    routed = await answer(port, raw_request(target=target, headers={"Authorization": "", **extra}))
    assert routed == lane


@pytest.mark.parametrize("target", ["/mcp/", "/MCP", "/mcp%2F", "//mcp", "/mc%70"])
async def test_near_misses_of_the_path_stay_404(make_gw: MakeGateway, target: str) -> None:
    gw = await make_gw()
    port = gw.server.port
    assert port is not None
    raw, _ = await answer(port, raw_request(target=target, headers={"Authorization": ""}))
    if target == "/mc%70":  # the router decodes it to the MCP path: the endpoint answers
        assert raw.startswith(b"HTTP/1.1 401 ")
    else:
        assert raw.startswith(b"HTTP/1.1 404 ")


def test_the_lane_needs_a_plain_path_and_one_route() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    async def fallback(request: web.BaseRequest) -> web.StreamResponse:
        return web.Response()

    def app_with(path: str, lane: str, method: str = "*") -> web.Application:
        app = web.Application()
        app.router.add_route(method, path, handler)
        app[fast_path.MCP_LANE] = lane
        return app

    assert fast_path.mcp_lane(app_with("/mcp", "/mcp"), fallback) is not fallback
    assert fast_path.mcp_lane(web.Application(), fallback) is fallback  # not marked
    assert fast_path.mcp_lane(app_with("/m cp", "/m cp"), fallback) is fallback  # to decode
    assert fast_path.mcp_lane(app_with("/mcp", "/mcp", "POST"), fallback) is fallback
    assert fast_path.mcp_lane(app_with("/other", "/mcp"), fallback) is fallback
