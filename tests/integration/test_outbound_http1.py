"""gateway.outbound: the same rules on aiohttp's client and on the lean HTTP/1.1 client.

The lean client (``Destination(lean=True)``, the backends' hot path) must keep every rule of
the aiohttp path: one deadline per exchange, the size cap, no redirects, the error types; and
it parses responses strictly. The shared rules run against both clients on a real aiohttp
server; the framing cases run against a raw socket server that writes exact bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from gateway.outbound.client import Destination, Outbound
from gateway.outbound.failures import (
    OutboundConnectionError,
    OutboundInvalidRequest,
    OutboundRedirect,
    OutboundTimeout,
    ResponseTooLarge,
)
from gateway.outbound.http1_codec import MAX_HEAD


@contextlib.asynccontextmanager
async def client(lean: bool, **kwargs: Any) -> AsyncIterator[Outbound]:
    outbound = Outbound(user_agent="outbound-test")
    outbound.add(Destination("d", connect_timeout_s=2.0, lean=lean, **kwargs))
    try:
        yield outbound
    finally:
        await outbound.close()


@pytest.fixture
async def server() -> AsyncIterator[TestServer]:
    seen: list[dict[str, Any]] = []

    async def echo(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        seen.append({"headers": dict(request.headers), "body": body, "peer": request.transport})
        return web.json_response({"got": body.decode(), "ua": request.headers.get("User-Agent")})

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)  # chunked
        for i in range(3):
            await response.write(f"data: {i}\n\n".encode())
            await asyncio.sleep(0.01)
        await response.write_eof()
        return response

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 5000)

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://127.0.0.1:9/elsewhere")

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(text="late")

    app = web.Application()
    app.router.add_post("/echo", echo)
    app.router.add_get("/stream", stream)
    app.router.add_get("/big", big)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/slow", slow)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    test_server.seen = seen  # type: ignore[attr-defined]
    yield test_server
    await test_server.close()


@pytest.mark.parametrize("lean", [False, True], ids=["aiohttp", "lean"])
class TestTheSameRulesOnBothClients:
    async def test_a_post_round_trips_and_the_connection_is_reused(
        self, server: TestServer, lean: bool
    ) -> None:
        async with client(lean) as outbound:
            for i in range(3):
                response = await outbound.request(
                    "d",
                    "POST",
                    str(server.make_url("/echo")),
                    timeout_s=5,
                    headers={"Content-Type": "application/json"},
                    body=b'{"n":%d}' % i,
                )
                assert response.status == 200
                assert response.headers["Content-Type"].startswith("application/json")
                assert b'"ua": "outbound-test"' in response.body
        transports = {id(entry["peer"]) for entry in server.seen}  # type: ignore[attr-defined]
        assert len(transports) == 1  # one keep-alive connection for all three

    async def test_a_chunked_stream_is_read_chunk_by_chunk(
        self, server: TestServer, lean: bool
    ) -> None:
        async with client(lean) as outbound:
            deadline = time.monotonic() + 5
            async with outbound.stream(
                "d", "GET", str(server.make_url("/stream")), deadline=deadline
            ) as response:
                assert response.content_type == "text/event-stream"
                data = b"".join([chunk async for chunk in response.chunks()])
                assert response.done
        assert data == b"data: 0\n\ndata: 1\n\ndata: 2\n\n"

    async def test_the_size_cap_the_redirect_and_the_deadline(
        self, server: TestServer, lean: bool
    ) -> None:
        async with client(lean) as outbound:
            with pytest.raises(ResponseTooLarge):
                await outbound.request(
                    "d", "GET", str(server.make_url("/big")), timeout_s=5, max_body=4999
                )
            ok = await outbound.request(
                "d", "GET", str(server.make_url("/big")), timeout_s=5, max_body=5000
            )
            assert len(ok.body) == 5000
            with pytest.raises(OutboundRedirect):
                await outbound.request("d", "GET", str(server.make_url("/redirect")), timeout_s=5)
            with pytest.raises(OutboundTimeout):
                await outbound.request("d", "GET", str(server.make_url("/slow")), timeout_s=0.2)
            # The pool still works after each failure.
            again = await outbound.request(
                "d", "POST", str(server.make_url("/echo")), timeout_s=5, body=b"{}"
            )
            assert again.status == 200

    async def test_a_header_value_with_a_line_break_is_refused(
        self, server: TestServer, lean: bool
    ) -> None:
        async with client(lean) as outbound:
            with pytest.raises(OutboundInvalidRequest):
                await outbound.request(
                    "d",
                    "POST",
                    str(server.make_url("/echo")),
                    timeout_s=5,
                    headers={"X-Injected": "a\r\nX-Evil: 1"},
                    body=b"{}",
                )
        assert server.seen == []  # type: ignore[attr-defined]

    async def test_nothing_listening_is_a_connection_error(self, lean: bool) -> None:
        async with client(lean) as outbound:
            with pytest.raises(OutboundConnectionError):
                await outbound.request("d", "GET", "http://127.0.0.1:9/x", timeout_s=5)


@contextlib.asynccontextmanager
async def raw_server(reply: bytes, *, close: bool = False) -> AsyncIterator[dict[str, Any]]:
    """A socket server answering every request with ``reply`` (exact bytes); ``close``: then
    it closes the connection."""
    state: dict[str, Any] = {"connections": 0, "requests": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                state["last"] = head + await reader.readexactly(length)
                state["requests"] += 1
                writer.write(reply)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    state["url"] = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/mcp"
    try:
        yield state
    finally:
        srv.close()
        await srv.wait_closed()


async def fetch(outbound: Outbound, url: str) -> tuple[int, bytes]:
    response = await outbound.request("d", "POST", url, timeout_s=3, body=b"{}")
    return response.status, response.body


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


class TestTheLeanClientsFraming:
    async def test_the_request_head_is_built_from_validated_parts(self) -> None:
        async with raw_server(OK) as srv, client(True) as outbound:
            await outbound.request(
                "d",
                "POST",
                srv["url"] + "?q=1",
                timeout_s=3,
                headers={"Authorization": "Bearer svc", "Content-Length": "999"},
                body=b"{}",
            )
        head = srv["last"].split(b"\r\n\r\n")[0].split(b"\r\n")
        assert head[0] == b"POST /mcp?q=1 HTTP/1.1"
        assert head[1].startswith(b"Host: 127.0.0.1:")
        assert b"Content-Length: 2" in head and b"Content-Length: 999" not in head
        assert b"User-Agent: outbound-test" in head
        assert not any(line.lower().startswith(b"accept-encoding") for line in head)

    @pytest.mark.parametrize(
        "reply",
        [
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Folded: a\r\n b\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nContent-Length: -2\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\n{}",
            b"HTTP/2 200 OK\r\nContent-Length: 2\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (MAX_HEAD + 10) + b"\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}",  # then closes: truncated
            b"HTTP/1.1 200 OK\r\nX-Split: a\nContent-Length: 2\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nX-Cr: a\rb\r\nContent-Length: 2\r\n\r\n{}",
            "HTTP/1.1 200 OK\r\nContent-Length: \u0662\r\n\r\n{}".encode(),
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n{}",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
            # aiohttp's CVE-2024-52304: a bare LF ends the line for a lenient parser.
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a\nb\r\n{}\r\n0\r\n\r\n",
            b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a="\rx"\r\n{}\r\n0\r\n\r\n',
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a\x01\r\n{}\r\n0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX: a\nb\r\n\r\n",
        ],
        ids=[
            "obs-fold",
            "two lengths",
            "negative length",
            "bad field name",
            "not HTTP/1.x",
            "bad chunk size",
            "bad chunk end",
            "head too large",
            "truncated body",
            "bare LF in a field",
            "bare CR in a value",
            "non-ASCII digit length",
            "gzip coding",
            "identity coding",
            "chunked twice",
            "bare LF in a chunk extension",
            "bare CR in a chunk extension",
            "control character in a chunk extension",
            "bare LF in a trailer",
        ],
    )
    async def test_a_malformed_response_is_a_connection_error(self, reply: bytes) -> None:
        async with raw_server(reply, close=True) as srv, client(True) as outbound:
            with pytest.raises(OutboundConnectionError):
                await asyncio.wait_for(fetch(outbound, srv["url"]), 5)

    async def test_sixteen_informational_answers_and_not_one_more(self) -> None:
        for count, ok in ((16, True), (17, False)):
            reply = b"HTTP/1.1 100 Continue\r\n\r\n" * count + OK
            async with raw_server(reply) as srv, client(True) as outbound:
                if ok:
                    assert await asyncio.wait_for(fetch(outbound, srv["url"]), 5) == (200, b"{}")
                else:
                    with pytest.raises(OutboundConnectionError):
                        await asyncio.wait_for(fetch(outbound, srv["url"]), 5)

    @pytest.mark.parametrize(
        "value", ["a\x01b", "a\x1bb", "a\x7fb", "a\x0bb", "a\x0cb", "a\rb", "a\nb", "a\0b"]
    )
    async def test_a_control_character_in_a_request_header_value_is_refused(
        self, value: str
    ) -> None:
        async with raw_server(OK) as srv, client(True) as outbound:
            with pytest.raises(OutboundInvalidRequest):
                await outbound.request(
                    "d", "POST", srv["url"], timeout_s=3, headers={"X-Value": value}, body=b"{}"
                )
            # A tab is field content (RFC 9110 §5.5), sent as it is.
            await outbound.request(
                "d", "POST", srv["url"], timeout_s=3, headers={"X-Value": "a\tb"}, body=b"{}"
            )
        assert srv["requests"] == 1 and b"X-Value: a\tb\r\n" in srv["last"]

    async def test_chunked_wins_over_content_length_and_the_connection_is_not_reused(
        self,
    ) -> None:
        reply = (
            b"HTTP/1.1 200 OK\r\nContent-Length: 999\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"1;ext=1\r\n{\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n"
        )
        async with raw_server(reply) as srv, client(True) as outbound:
            assert await fetch(outbound, srv["url"]) == (200, b"{}")
            assert await fetch(outbound, srv["url"]) == (200, b"{}")
        assert srv["connections"] == 2

    async def test_keep_alive_reuse_and_connection_close(self) -> None:
        async with raw_server(OK) as srv, client(True) as outbound:
            for _ in range(3):
                assert await fetch(outbound, srv["url"]) == (200, b"{}")
        assert (srv["connections"], srv["requests"]) == (1, 3)
        closing = OK.replace(b"Content-Length", b"Connection: close\r\nContent-Length")
        async with raw_server(closing) as srv, client(True) as outbound:
            for _ in range(2):
                assert await fetch(outbound, srv["url"]) == (200, b"{}")
        assert srv["connections"] == 2

    async def test_a_body_until_close_an_informational_answer_and_a_202(self) -> None:
        until_close = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{}"
        async with raw_server(until_close) as srv, client(True) as outbound:
            task = asyncio.ensure_future(fetch(outbound, srv["url"]))
            await asyncio.sleep(0.2)
            assert not task.done()  # still reading: the body ends when the peer closes
            task.cancel()
        async with raw_server(until_close, close=True) as srv, client(True) as outbound:
            assert await fetch(outbound, srv["url"]) == (200, b"{}")
            assert await fetch(outbound, srv["url"]) == (200, b"{}")
        assert srv["connections"] == 2  # never reused
        early = b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + OK
        async with raw_server(early) as srv, client(True) as outbound:
            assert await fetch(outbound, srv["url"]) == (200, b"{}")
        accepted = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
        async with raw_server(accepted) as srv, client(True) as outbound:
            assert await fetch(outbound, srv["url"]) == (202, b"")
            assert await fetch(outbound, srv["url"]) == (202, b"")
        assert srv["connections"] == 1

    async def test_a_body_left_unread_closes_the_connection(self) -> None:
        async with raw_server(OK) as srv, client(True) as outbound:
            deadline = time.monotonic() + 3
            async with outbound.stream("d", "POST", srv["url"], deadline=deadline, body=b"{}"):
                pass  # the caller leaves without reading the body
            assert await fetch(outbound, srv["url"]) == (200, b"{}")
        assert srv["connections"] == 2

    async def test_the_pool_limit_queues_requests(self) -> None:
        async with raw_server(OK) as srv, client(True, max_connections=1) as outbound:
            results = await asyncio.gather(*(fetch(outbound, srv["url"]) for _ in range(5)))
        assert results == [(200, b"{}")] * 5
        assert srv["connections"] == 1

    async def test_a_cancelled_waiter_passes_its_slot_on(self) -> None:
        async with raw_server(OK) as srv, client(True, max_connections=1) as outbound:
            deadline = time.monotonic() + 3
            async with outbound.stream(
                "d", "POST", srv["url"], deadline=deadline, body=b"{}"
            ) as held:
                second = asyncio.ensure_future(fetch(outbound, srv["url"]))
                third = asyncio.ensure_future(fetch(outbound, srv["url"]))
                await asyncio.sleep(0.05)  # both wait for the one connection
                assert await held.read() == b"{}"
            # Leaving the block woke the second; it is cancelled before it could run, so
            # the third must get the connection instead of waiting forever.
            second.cancel()
            assert await asyncio.wait_for(third, 3) == (200, b"{}")
            assert second.cancelled()
        assert srv["connections"] == 1

    async def test_urls_with_credentials_or_other_schemes_are_refused(self) -> None:
        async with client(True) as outbound:
            for url in (
                "http://user:pw@127.0.0.1:9/x",
                "ftp://127.0.0.1/x",
                "http:///x",
                "http://127.0.0.1:9/caf\u00e9",
                "http://127.0.0.1:9/a\x0bb",
            ):
                with pytest.raises(OutboundInvalidRequest):
                    await outbound.request("d", "GET", url, timeout_s=1)


class TestConnecting:
    async def test_a_host_name_is_resolved_and_connected(self, server: TestServer) -> None:
        url = f"http://localhost:{server.port}/echo"
        async with client(True) as outbound:
            response = await outbound.request("d", "POST", url, timeout_s=5, body=b"{}")
        assert response.status == 200

    async def test_an_unresolvable_host_is_a_connection_error(self) -> None:
        async with client(True) as outbound:
            with pytest.raises(OutboundConnectionError):
                await outbound.request("d", "GET", "http://mcp-backend.invalid/x", timeout_s=5)

    def test_a_deadline_during_resolution_leaves_no_unretrieved_future_on_uvloop(self) -> None:
        # uvloop's create_connection(host, ...) cancelled while resolving left its resolver
        # future unretrieved: "Future exception was never retrieved" in the log at shutdown.
        uvloop = pytest.importorskip("uvloop")

        async def attempts() -> list[str]:
            loop = asyncio.get_running_loop()
            seen: list[str] = []
            loop.set_exception_handler(lambda _loop, context: seen.append(context["message"]))
            async with client(True) as outbound:
                for _ in range(5):
                    with contextlib.suppress(OutboundTimeout, OutboundConnectionError):
                        await outbound.request(
                            "d", "GET", "http://mcp-backend.invalid/x", timeout_s=0.0005
                        )
                    await asyncio.sleep(0.05)  # the resolver answers meanwhile
            gc.collect()
            await asyncio.sleep(0)
            return seen

        assert uvloop.run(attempts()) == []


class TestAPausedConnection:
    """Reading pauses above 1 MiB buffered (flow control); a paused transport never sees the
    peer's FIN, so a connection whose body completed while paused must not be reused."""

    @pytest.mark.parametrize("framing", ["json", "sse"])
    async def test_a_body_that_ends_while_reading_is_paused_is_not_reused(
        self, framing: str
    ) -> None:
        # The first part stays under the 1 MiB pause mark; the few bytes of the second part
        # arrive in one read that crosses it, with the body's end, then the peer closes.
        first, last = b"x" * (1_048_576 - 64), b"y" * 128
        if framing == "json":
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            )
            parts = [head % (len(first) + len(last)) + first, last]
        else:
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            parts = [
                head + b"%x\r\n" % len(first) + first,
                b"\r\n%x\r\n" % len(last) + last + b"\r\n0\r\n\r\n",
            ]
        sent = asyncio.Event()
        connections = 0

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            try:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
                writer.write(parts[0])
                await writer.drain()
                await asyncio.sleep(0.2)  # the client buffers all of it, below the mark
                writer.write(parts[1])
                await writer.drain()
            finally:
                writer.close()  # the peer closes this keep-alive connection
                sent.set()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/mcp"
        try:
            async with client(True) as outbound:
                deadline = time.monotonic() + 5
                async with outbound.stream(
                    "d", "POST", url, deadline=deadline, body=b"{}", max_body=8 << 20
                ) as response:
                    await asyncio.wait_for(sent.wait(), 3)  # a busy reader: nothing read yet
                    await asyncio.sleep(0.1)
                    body = b"".join([chunk async for chunk in response.chunks()])
                assert body == first + last
                await asyncio.sleep(0.1)
                sent.clear()
                second = await outbound.request(
                    "d", "POST", url, timeout_s=3, body=b"{}", max_body=8 << 20
                )
                assert (second.status, len(second.body)) == (200, len(first) + len(last))
        finally:
            srv.close()
            await srv.wait_closed()
        assert connections == 2
