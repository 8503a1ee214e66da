"""A lean HTTP/1.1 client for the backend hop (``Destination(lean=True)``).

aiohttp's client cost about 107 µs of CPU per request at 16 concurrent requests against a
local backend, a quarter of the gateway's CPU per ``tools/call``; this client does the same
exchange in about 30 µs (docs/performance.md). It does less on purpose: one request per
connection at a time (no pipelining), ``Content-Length`` request bodies, no proxies, no
cookies, no decompression (``Accept-Encoding`` is never sent), no redirects (the caller gets
the 3xx and :mod:`gateway.outbound` refuses it). What it must do right, it does strictly:

- request heads are built from validated names and values: a CR, LF or NUL in a header value,
  or a name that is not an RFC 9110 token, refuses the request (no header injection);
- response heads are bounded (8190 bytes per line, 64 KiB in all, 100 fields); the status
  line, field syntax and framing are checked: obsolete line folding, a non-numeric or
  conflicting ``Content-Length``, or a malformed chunk is a broken response, never guessed at
  (RFC 9112 §5.2, §6.3, §7.1);
- ``Transfer-Encoding: chunked`` wins over ``Content-Length`` and the connection is then not
  reused; any other transfer coding is refused (none is decoded); a response without either
  is read until the peer closes;
- a connection goes back to the pool only after a response was read to its end on a
  keep-alive connection; one the peer closed, or one idle for longer than
  :data:`KEEPALIVE_S`, is never used again.

Deadlines, size caps and the error vocabulary stay with :class:`gateway.outbound.Outbound`,
which wraps every exchange in one deadline (:mod:`gateway.deadlines`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import ssl
import time
from collections import deque
from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

__all__ = ["KEEPALIVE_S", "Http1Error", "Http1Pool", "Http1Response"]

KEEPALIVE_S: Final = 15.0
"""An idle pooled connection older than this is closed instead of reused (aiohttp's default)."""
MAX_LINE: Final = 8190
MAX_HEAD: Final = 65_536
MAX_FIELDS: Final = 100
_PAUSE_AT: Final = 1_048_576
"""Buffered, unread bytes at which reading from the socket pauses (flow control)."""

_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_STATUS: Final = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: [^\r\n]*)?")
_NO_BODY: Final = frozenset({204, 304})
_BAD_VALUE: Final = re.compile(rb"[\r\n\0]")
_DIGITS: Final = re.compile(r"[0-9]{1,18}")


class Http1Error(Exception):
    """``kind``: ``invalid`` (the request cannot be built), ``connection`` (connect, send or
    read failed, or the response is malformed)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Target:
    __slots__ = ("host", "host_header", "path", "port", "tls")

    def __init__(self, url: str) -> None:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise Http1Error("invalid", "invalid request URL") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise Http1Error("invalid", "invalid request URL")
        if parts.username is not None or parts.password is not None:
            raise Http1Error("invalid", "credentials in the URL are not sent")
        if not url.isascii() or any(c <= " " or c == "\x7f" for c in url):
            raise Http1Error("invalid", "invalid request URL")  # RFC 9112 §3.2: no CTL, no SP
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        default = 443 if self.tls else 80
        self.port = port if port is not None else default
        name = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = name if self.port == default else f"{name}:{self.port}"
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


class _Connection(asyncio.Protocol):
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

    def take(self, n: int) -> bytes:
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    def usable(self, now: float) -> bool:
        return (
            not self.lost
            and not self.eof
            and not self.buffer
            and self.transport is not None
            and not self.transport.is_closing()
            and now - self.idle_since < KEEPALIVE_S
        )

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()


class Http1Response:
    """Status, headers, and the body as a stream of chunks (``readany``: ``b""`` at the end)."""

    def __init__(
        self,
        pool: Http1Pool,
        conn: _Connection,
        status: int,
        headers: CIMultiDictProxy[str],
        *,
        length: int | None,
        chunked: bool,
        reusable: bool,
    ) -> None:
        self.status = status
        self.headers = headers
        self.content_length = length if not chunked else None
        self._pool = pool
        self._conn: _Connection | None = conn
        # Bytes of the body (or of the current chunk) still to come; None: until the peer
        # closes, or (chunked) before the next chunk's size line.
        self._left = None if chunked else length
        self._chunked = chunked
        self._reusable = reusable
        self._done = length == 0 and not chunked

    async def readany(self) -> bytes:
        conn = self._conn
        if self._done or conn is None:
            return b""
        if self._chunked:
            return await self._read_chunk(conn)
        left = self._left
        if left is None:  # until the peer closes
            if not conn.buffer and not await conn.more():
                self._done = True
                self._reusable = False
                return b""
            return conn.take(len(conn.buffer))
        if not conn.buffer and not await conn.more():
            raise Http1Error("connection", "connection closed mid-body")
        data = conn.take(min(left, len(conn.buffer)))
        self._left = left - len(data)
        if self._left == 0:
            self._done = True
        return data

    async def read(self) -> bytes:
        parts: list[bytes] = []
        while chunk := await self.readany():
            parts.append(chunk)
        return b"".join(parts)

    async def _read_chunk(self, conn: _Connection) -> bytes:
        if self._left == 0:  # the CRLF after a chunk's data, then the next chunk's size line
            await _expect_crlf(conn)
            self._left = None
        if self._left is None:
            line = await _read_line(conn, MAX_LINE)
            size_text = line.split(b";", 1)[0].strip(b" \t")
            if (
                not size_text
                or len(size_text) > 16
                or not re.fullmatch(rb"[0-9A-Fa-f]+", size_text)
            ):
                raise Http1Error("connection", "malformed chunk size")
            size = int(size_text, 16)
            if size == 0:
                await _skip_trailers(conn)
                self._done = True
                return b""
            self._left = size
        if not conn.buffer and not await conn.more():
            raise Http1Error("connection", "connection closed mid-chunk")
        data = conn.take(min(self._left, len(conn.buffer)))
        self._left -= len(data)
        return data

    @property
    def done(self) -> bool:
        return self._done

    def release(self) -> None:
        """Hand the connection back: to the pool when the body was read to its end on a
        keep-alive connection, else closed."""
        conn, self._conn = self._conn, None
        if conn is not None:
            self._pool.put_back(conn, reuse=self._done and self._reusable)


async def _read_line(conn: _Connection, limit: int) -> bytes:
    while True:
        end = conn.buffer.find(b"\r\n")
        if end >= 0:
            if end > limit:
                raise Http1Error("connection", "response line too long")
            line = conn.take(end)
            del conn.buffer[:2]
            return line
        if len(conn.buffer) > limit:
            raise Http1Error("connection", "response line too long")
        if not await conn.more():
            raise Http1Error("connection", "connection closed mid-response")


async def _expect_crlf(conn: _Connection) -> None:
    while len(conn.buffer) < 2:
        if not await conn.more():
            raise Http1Error("connection", "connection closed mid-chunk")
    if conn.buffer[:2] != b"\r\n":
        raise Http1Error("connection", "malformed chunk")
    del conn.buffer[:2]


async def _skip_trailers(conn: _Connection) -> None:
    total = 0
    while line := await _read_line(conn, MAX_LINE):
        total += len(line)
        if total > MAX_HEAD:
            raise Http1Error("connection", "response trailers too large")


async def _read_head(conn: _Connection) -> tuple[int, int, list[tuple[str, str]]]:
    """(minor version, status, fields) of one response head."""
    while True:
        end = conn.buffer.find(b"\r\n\r\n")
        if end >= 0:
            break
        if len(conn.buffer) > MAX_HEAD:
            raise Http1Error("connection", "response head too large")
        if not await conn.more():
            raise Http1Error("connection", "connection closed before the response")
    if end > MAX_HEAD:
        raise Http1Error("connection", "response head too large")
    head = conn.take(end)
    del conn.buffer[:4]
    lines = head.split(b"\r\n")
    matched = _STATUS.fullmatch(lines[0])
    if matched is None or len(lines[0]) > MAX_LINE:
        raise Http1Error("connection", "malformed status line")
    if len(lines) - 1 > MAX_FIELDS:
        raise Http1Error("connection", "too many response fields")
    fields: list[tuple[str, str]] = []
    for raw in lines[1:]:
        if len(raw) > MAX_LINE or raw[:1] in (b" ", b"\t"):  # RFC 9112 §5.2: no obs-fold
            raise Http1Error("connection", "malformed response field")
        name, sep, value = raw.partition(b":")
        text = name.decode("latin-1")
        if not sep or not _TOKEN.fullmatch(text) or _BAD_VALUE.search(value):
            # RFC 9112 §5: a bare CR, LF or NUL in a field value is a broken message.
            raise Http1Error("connection", "malformed response field")
        fields.append((text, value.strip(b" \t").decode("utf-8", "surrogateescape")))
    return int(matched.group(1)), int(matched.group(2)), fields


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
        self._user_agent = user_agent
        self._idle: dict[tuple[str, int, bool], list[_Connection]] = {}
        self._open = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._targets: dict[str, _Target] = {}
        self._names: dict[str, bool] = {}
        self._closed = False

    def _target(self, url: str) -> _Target:
        target = self._targets.get(url)
        if target is None:
            target = _Target(url)
            if len(self._targets) < 256:
                self._targets[url] = target
        return target

    def _head(
        self, method: str, target: _Target, headers: Mapping[str, str] | None, length: int
    ) -> bytes:
        if not _TOKEN.fullmatch(method):
            raise Http1Error("invalid", "invalid request method")
        lines = [f"{method} {target.path} HTTP/1.1", f"Host: {target.host_header}"]
        seen_agent = False
        names = self._names
        for name, value in (headers or {}).items():
            valid = names.get(name)
            if valid is None:
                valid = _TOKEN.fullmatch(name) is not None
                if len(names) < 1024:
                    names[name] = valid
            if not valid or "\r" in value or "\n" in value or "\0" in value:
                raise Http1Error("invalid", "request could not be built")
            lowered = name.lower()
            if lowered in ("host", "content-length", "transfer-encoding", "connection"):
                continue  # framing is this client's business
            seen_agent = seen_agent or lowered == "user-agent"
            lines.append(f"{name}: {value}")
        if not seen_agent:
            lines.append(f"User-Agent: {self._user_agent}")
        if length or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {length}")
        lines.append("\r\n")
        return "\r\n".join(lines).encode("utf-8")

    async def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None,
        body: bytes | None,
    ) -> Http1Response:
        """Send one request, read its response head; the body is read from the response."""
        target = self._target(url)
        data = self._head(method, target, headers, len(body or b""))
        if body:
            data += body
        conn = await self._acquire(target)
        try:
            if conn.transport is None:
                raise Http1Error("connection", "connection failed")
            conn.busy = True
            conn.transport.write(data)
            while True:
                minor, status, fields = await _read_head(conn)
                if status >= 200:
                    break
                if status == 101:
                    raise Http1Error("connection", "unexpected protocol switch")
                # 1xx (100 Continue, 103 Early Hints): informational; the answer follows.
            return self._response(conn, method, minor, status, fields)
        except BaseException:
            self.put_back(conn, reuse=False)
            raise

    def _response(
        self,
        conn: _Connection,
        method: str,
        minor: int,
        status: int,
        fields: list[tuple[str, str]],
    ) -> Http1Response:
        headers: CIMultiDict[str] = CIMultiDict(fields)
        reusable = minor == 1
        for value in headers.getall("Connection", ()):
            if "close" in (token.strip().lower() for token in value.split(",")):
                reusable = False
        codings = [
            token.strip().lower()
            for value in headers.getall("Transfer-Encoding", ())
            for token in value.split(",")
        ]
        lengths = headers.getall("Content-Length", ())
        length: int | None = None
        if lengths:
            values = {value.strip() for value in lengths for value in value.split(",")}
            if len(values) != 1 or not _DIGITS.fullmatch(next(iter(values))):
                raise Http1Error("connection", "malformed Content-Length")
            length = int(next(iter(values)))
        chunked = False
        if method == "HEAD" or status in _NO_BODY:
            length = 0
        elif codings:
            # RFC 9112 §6.3: Transfer-Encoding overrides Content-Length (and such a message
            # may be an attempt at smuggling: the connection is not reused). This client
            # decodes no coding but chunked, so any other coding is a response it cannot
            # read, refused rather than passed on still encoded.
            if codings != ["chunked"]:
                raise Http1Error("connection", "unsupported transfer coding")
            chunked = True
            if lengths:
                reusable = False
        elif length is None:
            reusable = False  # until the peer closes
        return Http1Response(
            self,
            conn,
            status,
            CIMultiDictProxy(headers),
            length=length,
            chunked=chunked,
            reusable=reusable,
        )

    async def _acquire(self, target: _Target) -> _Connection:
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

    async def _connect(self, target: _Target) -> _Connection:
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
                        lambda: _Connection(loop),
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

    def put_back(self, conn: _Connection, *, reuse: bool) -> None:
        conn.busy = False
        if reuse and not self._closed and conn.transport is not None and not conn.lost:
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
