"""A lean HTTP/1.1 client for the backend hop (``Destination(lean=True)``).

aiohttp's client cost about 107 µs of CPU per request at 16 concurrent requests against a
local backend, a quarter of the gateway's CPU per ``tools/call``; this client does the same
exchange in about 30 µs (docs/performance.md). It does less on purpose: one request per
connection at a time (no pipelining), ``Content-Length`` request bodies, no proxies, no
cookies, no decompression (``Accept-Encoding`` is never sent), no redirects (the caller gets
the 3xx and :mod:`gateway.outbound` refuses it). What it must do right, it does strictly:

- request heads are built from validated names and values: a control character (anything
  below SP but HTAB, and DEL) in a header value, or a name that is not an RFC 9110 token,
  refuses the request (no header injection);
- response heads are bounded (8190 bytes per line, 64 KiB in all, 100 fields); the status
  line, field syntax and framing are checked: obsolete line folding, a non-numeric or
  conflicting ``Content-Length``, a malformed chunk, or a control character (a bare LF or CR
  too) in a chunk-size line or its extensions is a broken response, never guessed at
  (RFC 9112 §5.2, §6.3, §7.1; the chunk-extension case is aiohttp's CVE-2024-52304);
- at most :data:`~gateway.outbound.http1_codec.MAX_INFORMATIONAL` (16) ``1xx`` answers are
  read before the final one; one more is a broken response;
- ``Transfer-Encoding: chunked`` wins over ``Content-Length`` and the connection is then not
  reused; any other transfer coding is refused (none is decoded); a response without either
  is read until the peer closes;
- a connection goes back to the pool only after a response was read to its end on a
  keep-alive connection whose reading is not paused (flow control pauses it above 1 MiB
  buffered, and a paused transport would never see the peer's FIN); one the peer closed, or
  one idle for longer than :data:`KEEPALIVE_S`, is never used again.

This module holds the connections and the pool; the message syntax (building request heads,
parsing response heads, framing and bodies) is :mod:`gateway.outbound.http1_codec`. Deadlines,
size caps and the error vocabulary stay with :class:`gateway.outbound.client.Outbound`, which wraps
every exchange in one deadline (:mod:`gateway.deadlines`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections import deque
from collections.abc import Mapping
from typing import Final

from gateway.outbound.http1_codec import (
    MAX_INFORMATIONAL,
    Http1Error,
    Http1Response,
    RequestHeads,
    RequestTarget,
    frame_response,
    read_head,
)

__all__ = ["KEEPALIVE_S", "Connection", "Http1Pool"]

KEEPALIVE_S: Final = 15.0
"""An idle pooled connection older than this is closed instead of reused (aiohttp's default)."""
_PAUSE_AT: Final = 1_048_576
"""Buffered, unread bytes at which reading from the socket pauses (flow control)."""


class Connection(asyncio.Protocol):
    """One socket: bytes in a buffer, a waiter for the reader, EOF and loss remembered."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.lost = False
        self.busy = False
        self.idle_since = 0.0
        self.key: tuple[str, int, bool] = ("", 0, False)
        """The pool key (host, port, TLS) this connection belongs to."""
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if not self.busy:  # bytes nobody asked for: this connection is not safe to reuse
            self.lost = True
            if self.transport is not None:
                self.transport.close()
            return
        self.buffer += data
        if len(self.buffer) > _PAUSE_AT and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.eof = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def more(self) -> bool:
        """Wait for more bytes; False once the peer is done sending (EOF or closed)."""
        if self.eof:
            return False
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        size = len(self.buffer)
        while len(self.buffer) == size and not self.eof:
            self._waiter = self.loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return len(self.buffer) > size

    @property
    def paused(self) -> bool:
        """Reading is paused: whatever the peer sent since (its FIN too) is still unread."""
        return self._paused

    def take(self, n: int) -> bytes:
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    def usable(self, now: float) -> bool:
        return (
            not self.lost
            and not self.eof
            and not self._paused
            and not self.buffer
            and self.transport is not None
            and not self.transport.is_closing()
            and now - self.idle_since < KEEPALIVE_S
        )

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()


async def _open_socket(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    """A connected non-blocking socket to the first address of ``host`` that accepts.

    Resolution and connect are separate steps because uvloop's ``create_connection(host, …)``
    leaves its resolver future unretrieved when it is cancelled while resolving (a deadline or
    a drain), which logs "Future exception was never retrieved" (MagicStack/uvloop#437).
    """
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    failure: OSError = OSError(f"no address for {host!r}")
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            failure = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    raise failure


class Http1Pool:
    """Keep-alive connections to one destination (at most ``limit`` open at a time)."""

    def __init__(
        self,
        *,
        limit: int,
        connect_timeout_s: float,
        ssl_context: ssl.SSLContext | None,
        user_agent: str,
    ) -> None:
        self._limit = limit
        self._connect_timeout_s = connect_timeout_s
        self._ssl_context = ssl_context
        self._idle: dict[tuple[str, int, bool], list[Connection]] = {}
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._heads = RequestHeads(user_agent)
        self._closed = False

    async def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        body: bytes | None,
    ) -> Http1Response:
        """Send one request, read its response head; the body is read from the response."""
        target = self._heads.target(url)
        data = self._heads.encode(method, target, headers, len(body or b""))
        if body:
            data += body
        conn = await self._acquire(target)
        try:
            if conn.transport is None:
                raise Http1Error("connection", "connection failed")
            conn.busy = True
            conn.transport.write(data)
            informational = 0
            while True:
                minor, status, fields = await read_head(conn)
                if status >= 200:
                    break
                if status == 101:
                    raise Http1Error("connection", "unexpected protocol switch")
                # 1xx (100 Continue, 103 Early Hints): informational; the answer follows,
                # after a bounded number of them (else a backend spins the call to its deadline).
                informational += 1
                if informational > MAX_INFORMATIONAL:
                    raise Http1Error("connection", "too many informational responses")
            return frame_response(
                self, conn, method=method, minor=minor, status=status, fields=fields
            )
        except BaseException:
            self.put_back(conn, reuse=False)
            raise

    async def _acquire(self, target: RequestTarget) -> Connection:
        key = (target.host, target.port, target.tls)
        while True:
            if self._closed:
                raise Http1Error("connection", "client closed")
            idle = self._idle.get(key)
            now = time.monotonic()
            while idle:
                conn = idle.pop()
                if conn.usable(now):
                    return conn
                conn.close()
                self._open -= 1
            if self._open < self._limit:
                self._open += 1
                try:
                    conn = await self._connect(target)
                    conn.key = key
                    return conn
                except BaseException:
                    self._open -= 1
                    self._wake_one()
                    raise
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # the slot this waiter was woken for goes to the next
                raise
            finally:
                if not waiter.done():
                    waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)

    async def _connect(self, target: RequestTarget) -> Connection:
        loop = asyncio.get_running_loop()
        context: ssl.SSLContext | None = None
        if target.tls:
            context = self._ssl_context or ssl.create_default_context()
            self._ssl_context = context
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                sock = await _open_socket(loop, target.host, target.port)
                try:
                    _, conn = await loop.create_connection(
                        lambda: Connection(loop),
                        sock=sock,
                        ssl=context,
                        server_hostname=target.host if context is not None else None,
                    )
                except BaseException:
                    sock.close()
                    raise
        except TimeoutError:
            raise Http1Error("connection", "connect timed out") from None
        except (OSError, ssl.SSLError) as exc:
            raise Http1Error("connection", "connection failed") from exc
        return conn

    def put_back(self, conn: Connection, *, reuse: bool) -> None:
        conn.busy = False
        # A body that ended while reading was paused leaves the peer's FIN, if it closed,
        # unseen: such a connection is closed, never reused (a reconnect after a > 1 MiB body).
        if (
            reuse
            and not self._closed
            and conn.transport is not None
            and not conn.lost
            and not conn.paused
        ):
            conn.idle_since = time.monotonic()
            self._idle.setdefault(conn.key, []).append(conn)
        else:
            conn.close()
            self._open -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)
