"""Hostile clients at the HTTP layer, through the production listener and raw sockets.

Issue 12: no header deadline or keep-alive bound, unbounded heads and connections, 500s and
tracebacks from ``Content-Encoding``, aiohttp's plain-text 400 echoing request bytes with a
traceback per request, a folded bearer token in an ERROR line, one caller taking every in-flight
slot. Each answer is a status-table row with ``Cache-Control: no-store`` and ``X-Request-Id``;
no traceback and no request bytes reach the log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import ipaddress
import json
import logging
import re
import time
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from gateway.app.connection_limits import LOG_INTERVAL_S
from gateway.errors import all_rows
from tests.integration.front_door.conftest import MakeGateway
from tests.support.gateway_harness import (
    Gateway,
    harness_config,
    modern_headers,
    modern_request,
)
from tests.support.raw_http import RawResponse, exchange, parse_response, request_bytes

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)
DISCOVER = json.dumps(modern_request("server/discover", 1)).encode()
SECRET = "tok-FOLDED-SECRET-9c1e"


def discover_request(**extra: str) -> bytes:
    return request_bytes(modern_headers("server/discover", **extra), DISCOVER)


async def dribble(port: int, data: bytes, *, size: int, pause_s: float = 0.0) -> bytes:
    """Send ``data`` ``size`` bytes at a time until the server answers; return its answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answer = asyncio.ensure_future(reader.read())  # the server half-closes after answering
    try:
        for start in range(0, len(data), size):
            if answer.done():
                break
            writer.write(data[start : start + size])
            await writer.drain()
            if pause_s:
                await asyncio.wait([answer], timeout=pause_s)
    except ConnectionError:
        pass  # the server gave up on us while we were still sending
    try:
        return await asyncio.wait_for(answer, 5)
    except ConnectionError:
        return b""
    finally:
        writer.close()


async def read_one(reader: asyncio.StreamReader) -> RawResponse:
    """One response from a kept-alive connection (framed by Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    response = parse_response(head)
    body = await reader.readexactly(int(response.headers["Content-Length"]))
    return dataclasses.replace(response, body=body)


ROWS = {cls.row: cls for cls in all_rows()}


def assert_row(response: RawResponse, status: int, error: str, *, listener: bool = True) -> None:
    """A rendered row; ``listener``: answered by the listener itself, which always sets an
    ``X-Request-Id`` (the harness app has no request-id middleware for the pipeline's rows).
    A row with a JSON-RPC body (``body_code``) is checked for its code and a null id, the
    others for their fixed JSON's ``error``."""
    assert response.status == status, (response.status, response.body[:200])
    assert response.headers["Cache-Control"] == "no-store"
    if listener:
        assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Request-Id"])
        # RFC 9112 §2.3: the highest version the server supports (issue 43: these said 1.0).
        assert response.version == "HTTP/1.1"
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    code = ROWS[error].body_code
    if code is None:
        assert body["error"] == error
    else:
        assert (body["jsonrpc"], body["id"], body["error"]["code"]) == ("2.0", None, code)
        assert body["error"]["message"].startswith(ROWS[error].message)


@pytest.fixture
def server_log(caplog: pytest.LogCaptureFixture) -> Iterator[list[dict[str, Any]]]:
    """Everything logged while the test runs: structlog events and stdlib records (aiohttp)."""
    caplog.set_level(logging.DEBUG)
    with capture_logs() as events:
        yield events
    for record in caplog.records:
        events.append(
            {
                "event": record.getMessage(),
                "log_level": record.levelname.lower(),
                "logger": record.name,
                "exc_info": record.exc_info,
            }
        )


def errors_and_tracebacks(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e
        for e in events
        if e.get("log_level") in {"error", "critical", "exception"} or e.get("exc_info")
    ]


# --- item 1: header deadline, keep-alive, head size, connections ------------------------------


class TestHeaderDeadline:
    @pytest.mark.row("request_timeout")
    @pytest.mark.parametrize("sent", [b"", b"POST /mcp HTTP/1.1\r\nHost: x\r\nX-Slow: 1"])
    async def test_a_head_not_complete_within_header_timeout_is_answered_408_and_closed(
        self, make_gw: MakeGateway, sent: bytes
    ) -> None:
        gw = await make_gw(header_timeout_s=0.3)
        began = time.monotonic()
        response = await exchange(gw.server.port, sent, timeout_s=5)
        assert_row(response, 408, "request_timeout")
        assert 0.25 <= time.monotonic() - began < 3.0
        assert gw.authenticator.calls == 0

    async def test_a_head_trickling_in_byte_by_byte_is_cut_at_the_deadline(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(header_timeout_s=0.4)
        began = time.monotonic()
        raw = await dribble(gw.server.port, discover_request(), size=1, pause_s=0.02)
        assert parse_response(raw).status == 408
        assert time.monotonic() - began < 3.0

    async def test_a_kept_alive_connection_gets_the_deadline_again_for_its_next_head(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(header_timeout_s=0.3, keepalive_timeout_s=5)
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.server.port)
        writer.write(request_bytes(modern_headers("server/discover"), DISCOVER, close=False))
        await writer.drain()
        first = await asyncio.wait_for(read_one(reader), 5)
        assert first.status == 200
        await asyncio.sleep(0.5)  # idle longer than header_timeout: keep-alive rules here
        writer.write(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")  # ... then a head that stalls
        await writer.drain()
        rest = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        assert b" 408 " in rest.split(b"\r\n", 1)[0]


class TestKeepAlive:
    async def test_an_idle_kept_alive_connection_is_closed_after_keepalive_timeout(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(keepalive_timeout_s=0.3)
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.server.port)
        writer.write(request_bytes(modern_headers("server/discover"), DISCOVER, close=False))
        await writer.drain()
        assert (await asyncio.wait_for(read_one(reader), 5)).status == 200
        began = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed by the gateway
        assert 0.2 <= time.monotonic() - began < 3.0
        writer.close()


class TestHeadSize:
    CAP = 16_384

    def head_of(self, size: int) -> tuple[bytes, bytes]:
        """A canonical request head of exactly ``size`` bytes (padding in one header)."""
        empty = discover_request(**{"X-Pad": ""}).partition(b"\r\n\r\n")[0]
        pad = size - len(empty) - 4
        assert pad >= 0
        head, _, body = discover_request(**{"X-Pad": "x" * pad}).partition(b"\r\n\r\n")
        return head + b"\r\n\r\n", body

    @pytest.mark.row("headers_too_large")
    @pytest.mark.parametrize(
        "dribbled", [0, 1000, -1], ids=["one write", "1000 a write", "terminator split"]
    )
    async def test_a_head_at_the_cap_is_served_and_one_byte_more_is_431(
        self, make_gw: MakeGateway, dribbled: int
    ) -> None:
        gw = await make_gw(max_header_bytes=self.CAP, header_timeout_s=10)
        for size, status in [(self.CAP, 200), (self.CAP + 1, 431)]:
            head, body = self.head_of(size)
            assert len(head) == size
            if dribbled == -1:
                response = parse_response(await self._split_end(gw.server.port, head, body))
            elif dribbled:
                response = parse_response(await dribble(gw.server.port, head + body, size=dribbled))
            else:
                response = await exchange(gw.server.port, head + body)
            assert response.status == status, (size, response.body[:100])
        assert_row(response, 431, "headers_too_large")

    @staticmethod
    async def _split_end(port: int, head: bytes, body: bytes) -> bytes:
        """All but the last 6 bytes of the head, then those one by one: the server reads the
        CRLFCRLF terminator across several reads."""
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answer = asyncio.ensure_future(reader.read())
        try:
            writer.write(head[:-6])
            await writer.drain()
            for byte in head[-6:]:
                await asyncio.sleep(0.02)
                if answer.done():
                    break
                writer.write(bytes([byte]))
                await writer.drain()
            if not answer.done():
                writer.write(body)
                await writer.drain()
        except ConnectionError:
            pass
        try:
            return await asyncio.wait_for(answer, 5)
        finally:
            writer.close()

    @pytest.mark.row("headers_too_large")
    async def test_one_header_line_over_16_kib_is_431_and_an_8_kib_token_still_gets_the_401(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw()
        response = await exchange(gw.server.port, discover_request(**{"X-Big": "a" * 17_000}))
        assert_row(response, 431, "headers_too_large")
        response = await exchange(
            gw.server.port, discover_request(Authorization="Bearer " + "A" * 8192)
        )
        assert response.status == 401

    async def test_a_header_flood_is_refused_early_and_a_normal_client_is_served_meanwhile(
        self, make_gw: MakeGateway, server_log: list[dict[str, Any]]
    ) -> None:
        gw = await make_gw()  # the default cap: 32 KiB
        line = b"X-Flood-%d: " + b"a" * 16_000 + b"\r\n"
        flood = b"POST /mcp HTTP/1.1\r\nHost: x\r\n" + b"".join(line % i for i in range(128))

        async def flooder() -> int:
            raw = await dribble(gw.server.port, flood, size=65_536)
            return parse_response(raw).status if raw else 0

        attack = asyncio.gather(*(flooder() for _ in range(50)))
        normal = await exchange(gw.server.port, discover_request())
        assert normal.status == 200
        statuses = await attack
        # Refused at 32 KiB of the 2 MiB each tried to send. A flooder that keeps sending past
        # the lingering close's budget is reset (0) and may never read its 431.
        assert set(statuses) <= {431, 0} and 431 in statuses
        assert not errors_and_tracebacks(server_log)


class TestConnectionCaps:
    async def _hold(self, port: int, count: int) -> list[asyncio.StreamWriter]:
        writers = []
        for _ in range(count):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writers.append(writer)
        await asyncio.sleep(0.05)
        return writers

    @pytest.mark.row("over_capacity")
    async def test_past_max_connections_a_new_connection_is_answered_503_and_closed(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(max_connections=5, max_connections_per_ip=100, header_timeout_s=5)
        held = await self._hold(gw.server.port, 5)
        response = await exchange(gw.server.port, discover_request())
        assert_row(response, 503, "over_capacity")
        assert response.headers["Retry-After"] == "1"
        held.pop().close()
        await asyncio.sleep(0.1)
        assert (await exchange(gw.server.port, discover_request())).status == 200
        for writer in held:
            writer.close()
        assert gw.metrics.rejections_total.labels("over_capacity")._value.get() == 1

    @pytest.mark.row("rate_limited")
    async def test_past_max_connections_per_ip_a_new_connection_is_answered_429(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(max_connections_per_ip=3, header_timeout_s=5)
        held = await self._hold(gw.server.port, 3)
        response = await exchange(gw.server.port, discover_request())
        assert_row(response, 429, "rate_limited")
        assert response.headers["Retry-After"] == "1"
        assert gw.authenticator.calls == 0
        scope = gw.metrics.rate_limited_total.labels(scope="ip_connections")
        assert scope._value.get() == 1
        for writer in held:
            writer.close()

    async def test_a_trusted_proxy_is_exempt_from_the_per_ip_connection_cap(
        self, make_gw: MakeGateway
    ) -> None:
        config = dataclasses.replace(
            harness_config(max_connections_per_ip=3, header_timeout_s=5), trusted_proxies=LOOPBACK
        )
        gw = await make_gw(config=config)
        held = await self._hold(gw.server.port, 5)
        assert (await exchange(gw.server.port, discover_request())).status == 200
        for writer in held:
            writer.close()

    async def test_a_bounded_slowloris_is_cut_by_the_deadline_and_service_holds(
        self, make_gw: MakeGateway, server_log: list[dict[str, Any]]
    ) -> None:
        """300 connections dribbling a head, one byte every 100 ms, for at most ~2 s."""
        gw = await make_gw(header_timeout_s=1.0, max_connections_per_ip=1000)
        head = discover_request()
        answered: list[int] = []

        async def loris() -> None:
            raw = await dribble(gw.server.port, head[:40], size=1, pause_s=0.1)
            answered.append(parse_response(raw).status if raw else 0)

        attack = asyncio.gather(*(loris() for _ in range(300)))
        await asyncio.sleep(0.3)
        began = time.monotonic()
        normal = await exchange(gw.server.port, discover_request())
        assert normal.status == 200
        assert time.monotonic() - began < 2.0  # generous: served while 300 connections hang
        await asyncio.wait_for(attack, 10)
        assert answered.count(408) >= 290, sorted(set(answered))
        assert not errors_and_tracebacks(server_log)
        # Every connection of the attack is gone (the counts are per replica).
        listener = gw.server.runner.server  # type: ignore[union-attr]
        await asyncio.sleep(0.1)
        assert listener.connection_counts.total == 0


# --- item 2: Content-Encoding ---------------------------------------------------------------


class TestContentEncoding:
    @pytest.mark.row("unsupported_content_encoding")
    @pytest.mark.parametrize(
        ("coding", "body"),
        [
            ("gzip", gzip.compress(DISCOVER)),
            ("gzip", b"not gzip at all"),
            ("deflate", zlib.compress(DISCOVER)),
            ("br", b"\x00\x01garbage"),
            ("identity, gzip", gzip.compress(DISCOVER)),
        ],
        ids=["valid gzip", "bad gzip", "deflate", "br", "listed twice"],
    )
    async def test_any_content_coding_is_415_with_accept_encoding_identity(
        self, gw: Gateway, server_log: list[dict[str, Any]], coding: str, body: bytes
    ) -> None:
        headers = modern_headers("server/discover", **{"Content-Encoding": coding})
        data = request_bytes(headers, body)
        response = await exchange(gw.server.port, data)
        assert_row(response, 415, "unsupported_content_encoding", listener=False)
        assert response.headers["Accept-Encoding"] == "identity"
        assert response.json()["error"]["message"] == "Request bodies must not be content-encoded"
        assert gw.backend.calls == []
        assert not errors_and_tracebacks(server_log)

    async def test_identity_is_not_a_coding(self, gw: Gateway) -> None:
        data = request_bytes(
            modern_headers("server/discover", **{"Content-Encoding": "identity"}), DISCOVER
        )
        assert (await exchange(gw.server.port, data)).status == 200

    @pytest.mark.parametrize(
        ("authorization", "status"),
        [(None, 401), ("Bearer nope", 401), ("Bearer good", 415)],
    )
    @pytest.mark.parametrize("chunked", [False, True])
    async def test_every_path_is_a_4xx_without_an_error_line(
        self,
        make_gw: MakeGateway,
        server_log: list[dict[str, Any]],
        authorization: str | None,
        status: int,
        chunked: bool,
    ) -> None:
        gw = await make_gw()
        headers = modern_headers("server/discover", **{"Content-Encoding": "gzip"})
        headers.pop("Authorization")
        if authorization is not None:
            headers["Authorization"] = authorization
        bad = b"\x1f\x8b\x08 this is not a valid gzip stream" * 20
        if chunked:
            headers["Transfer-Encoding"] = "chunked"
            data = request_bytes(headers) + b"%x\r\n%s\r\n0\r\n\r\n" % (len(bad), bad)
        else:
            data = request_bytes(headers, bad)
        response = await exchange(gw.server.port, data)
        assert response.status == status
        assert not errors_and_tracebacks(server_log)


# --- items 3 and 4: malformed HTTP, folded headers ------------------------------------------

MALFORMED = {
    "garbage request line": b"GARBAGE\r\n\r\n",
    "bad method": b"P@ST /mcp HTTP/1.1\r\nHost: x\r\n\r\n",
    "bad version": b"POST /mcp HTTP/9.9\r\nHost: x\r\n\r\n",
    "no host": b"POST /mcp HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
    "nul in a value": b"POST /mcp HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    "space before colon": b"POST /mcp HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n",
    "length and chunked": (
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "bad chunk size": (
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n"
    ),
    # RFC 9112 §6.3: a request whose final transfer coding is not chunked cannot be framed.
    "final coding not chunked": (
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    ),
    "folded token": (
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\n "
        + SECRET.encode()
        + b"\r\nContent-Length: 0\r\n\r\n"
    ),
    "folded token, tab": (
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-\r\n\t"
        + SECRET.encode()
        + b"\r\n\r\n"
    ),
}


class TestMalformedHttp:
    @pytest.mark.row("malformed_request")
    @pytest.mark.parametrize("raw", list(MALFORMED.values()), ids=list(MALFORMED))
    async def test_malformed_http_gets_the_gateways_fixed_json_400(
        self, gw: Gateway, server_log: list[dict[str, Any]], raw: bytes
    ) -> None:
        response = await exchange(gw.server.port, raw)
        assert_row(response, 400, "malformed_request")
        assert response.json() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -31400, "message": "Malformed HTTP request"},
        }
        assert gw.authenticator.calls == 0
        assert not errors_and_tracebacks(server_log)
        logged = json.dumps(server_log, default=str)
        assert SECRET not in logged and "GARBAGE" not in logged and "P@ST" not in logged

    async def test_a_flood_of_malformed_requests_logs_one_line_a_second_with_a_count(
        self, gw: Gateway, server_log: list[dict[str, Any]]
    ) -> None:
        began = time.monotonic()
        responses = await asyncio.gather(
            *(exchange(gw.server.port, MALFORMED["garbage request line"]) for _ in range(200))
        )
        assert {r.status for r in responses} == {400}
        await asyncio.sleep(1.05)
        await exchange(gw.server.port, MALFORMED["bad method"])
        elapsed = time.monotonic() - began
        lines = [e for e in server_log if e["event"] == "http.refused"]
        # One line a second at most (the first at once): on a loaded machine the flood itself
        # may take seconds, so the bound follows the time it took, never the 201 refusals.
        assert 2 <= len(lines) <= 1 + int(elapsed / LOG_INTERVAL_S), (len(lines), elapsed)
        assert all(line["log_level"] == "warning" for line in lines)
        assert sum(line["suppressed"] for line in lines) + len(lines) == 201
        assert not errors_and_tracebacks(server_log)

    async def test_a_folded_token_never_reaches_a_log_line_or_the_answer(
        self, gw: Gateway, server_log: list[dict[str, Any]]
    ) -> None:
        for name in ("folded token", "folded token, tab"):
            response = await exchange(gw.server.port, MALFORMED[name])
            assert response.status == 400
            assert SECRET.encode() not in response.body
            assert all(SECRET not in value for value in response.headers.values())
        assert SECRET not in json.dumps(server_log, default=str)


def chunked_request(coding: str, body: bytes, *, close: bool = True) -> bytes:
    """A modern ``server/discover`` with a valid token, its body chunked in two pieces."""
    headers = modern_headers("server/discover", **{"Transfer-Encoding": coding})
    head = request_bytes(headers, close=close)
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:half], body[half:]))
    return head + chunks + b"0\r\n\r\n"


class TestTransferCodings:
    @pytest.mark.row("unsupported_transfer_coding")
    @pytest.mark.parametrize(
        "coding", ["gzip, chunked", "identity, chunked", "x-custom, chunked", "deflate,chunked"]
    )
    async def test_a_coding_besides_chunked_is_501_before_authentication(
        self, gw: Gateway, server_log: list[dict[str, Any]], coding: str
    ) -> None:
        # aiohttp's parser accepted these and removed only the chunking: the gzip was ignored.
        body = gzip.compress(DISCOVER) if "gzip" in coding else DISCOVER
        response = await exchange(gw.server.port, chunked_request(coding, body))
        assert_row(response, 501, "unsupported_transfer_coding")
        assert response.json() == {  # JSON-RPC, like every listener answer an SDK must read
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -31501,
                "message": "Transfer codings other than chunked are not supported",
            },
        }
        assert "WWW-Authenticate" not in response.headers
        assert gw.authenticator.calls == 0
        assert not errors_and_tracebacks(server_log)
        refused = [e for e in server_log if e["event"] == "http.refused"]
        assert [(e["reason"], e["status"]) for e in refused] == [("transfer_coding", 501)]

    @pytest.mark.parametrize("coding", ["chunked", "Chunked"])
    async def test_a_single_chunked_goes_through_the_pipeline(
        self, gw: Gateway, coding: str
    ) -> None:
        response = await exchange(gw.server.port, chunked_request(coding, DISCOVER))
        assert response.status == 200
        assert response.json()["result"]["resultType"] == "complete"

    async def test_a_pipelined_request_behind_the_refused_one_is_never_handled(
        self, gw: Gateway
    ) -> None:
        refused = chunked_request("gzip, chunked", gzip.compress(DISCOVER), close=False)
        response = await exchange(gw.server.port, refused + discover_request())
        assert response.status == 501
        assert gw.authenticator.calls == 0

    @pytest.mark.parametrize("authorization", [None, "Bearer good"])
    async def test_an_unknown_expectation_goes_through_the_pipeline_not_aiohttps_417(
        self, gw: Gateway, authorization: str | None
    ) -> None:
        # aiohttp's default Expect handler answered a plain-text 417 quoting the header, before
        # the pipeline (no no-store, no X-Request-Id, no authentication). RFC 9110 §10.1.1 lets
        # a server ignore an expectation it does not know.
        headers = modern_headers("server/discover", Expect="bogus<" + SECRET + ">")
        if authorization is None:
            del headers["Authorization"]
        else:
            headers["Authorization"] = authorization
        response = await exchange(gw.server.port, request_bytes(headers, DISCOVER))
        assert response.status == (401 if authorization is None else 200)
        assert response.headers["Cache-Control"] == "no-store"
        assert SECRET.encode() not in response.body
        assert gw.authenticator.calls == 1  # the pipeline ran; aiohttp's 417 came before it

    async def test_100_continue_still_gets_the_interim_answer_then_the_pipelines(
        self, gw: Gateway
    ) -> None:
        headers = modern_headers("server/discover", Expect="100-continue")
        head = request_bytes(headers, DISCOVER).removesuffix(DISCOVER)
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.server.port)
        try:
            writer.write(head)
            await writer.drain()
            interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
            writer.write(DISCOVER)
            await writer.drain()
            response = parse_response(await asyncio.wait_for(reader.read(), 5))
        finally:
            writer.close()
        assert response.status == 200
        assert response.json()["result"]["resultType"] == "complete"


# --- item 7: in-flight shares ------------------------------------------------------------------


class _SlowBody:
    """Requests whose body never finishes until ``release``: each holds an in-flight slot."""

    def __init__(self, gw: Gateway) -> None:
        self.gw = gw
        self.release = asyncio.Event()
        self.tasks: list[asyncio.Task[Any]] = []

    async def _body(self) -> AsyncIterator[bytes]:
        yield DISCOVER[:10]
        await self.release.wait()
        yield DISCOVER[10:]

    def hold(self, token: str, ip: str) -> None:
        headers = modern_headers(
            "server/discover", Authorization=f"Bearer {token}", **{"X-Forwarded-For": ip}
        )
        self.tasks.append(
            asyncio.ensure_future(self.gw.client.post("/mcp", data=self._body(), headers=headers))
        )

    async def finish(self) -> list[int]:
        self.release.set()
        return [(await task).status for task in self.tasks]


async def _until(predicate: Any) -> None:
    for _ in range(300):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


class TestInFlightShares:
    @pytest.mark.row("rate_limited")
    async def test_one_principal_cannot_take_every_slot(self, make_gw: MakeGateway) -> None:
        config = dataclasses.replace(harness_config(max_in_flight=8), trusted_proxies=LOOPBACK)
        gw = await make_gw(config=config)
        slow = _SlowBody(gw)
        for n in range(2):  # a quarter of 8, from two addresses so only the principal counts
            slow.hold("good", f"198.51.100.{n + 1}")
        await _until(lambda: gw.endpoint.in_flight == 2)
        headers = modern_headers("server/discover", **{"X-Forwarded-For": "198.51.100.9"})
        response = await gw.post(DISCOVER, headers)
        assert response.status == 429
        assert response.headers["Retry-After"] == "1"
        assert (await response.json())["error"] == {
            "code": -31429,
            "message": "Too many requests, retry in 1 s",
        }
        # Another user still gets in: the replica has 6 free slots.
        other = modern_headers(
            "server/discover", Authorization="Bearer ops", **{"X-Forwarded-For": "203.0.113.5"}
        )
        assert (await gw.post(DISCOVER, other)).status == 200
        assert await slow.finish() == [200, 200]
        limited = gw.metrics.rate_limited_total.labels(scope="principal_concurrency")
        assert limited._value.get() == 1

    @pytest.mark.row("rate_limited")
    async def test_one_address_cannot_take_every_slot_before_authentication(
        self, make_gw: MakeGateway
    ) -> None:
        config = dataclasses.replace(harness_config(max_in_flight=8), trusted_proxies=LOOPBACK)
        gw = await make_gw(config=config)
        slow = _SlowBody(gw)
        slow.hold("good", "198.51.100.7")
        slow.hold("ops", "198.51.100.7")
        await _until(lambda: gw.endpoint.in_flight == 2)
        calls = gw.authenticator.calls
        headers = modern_headers(
            "server/discover", Authorization="Bearer basic", **{"X-Forwarded-For": "198.51.100.7"}
        )
        response = await gw.post(DISCOVER, headers)
        assert response.status == 429
        assert gw.authenticator.calls == calls  # refused before authentication
        elsewhere = modern_headers(
            "server/discover", Authorization="Bearer basic", **{"X-Forwarded-For": "203.0.113.5"}
        )
        assert (await gw.post(DISCOVER, elsewhere)).status == 200
        assert await slow.finish() == [200, 200]
        limited = gw.metrics.rate_limited_total.labels(scope="ip_concurrency")
        assert limited._value.get() == 1
