"""HTTP/1.1 message syntax for the lean client (:mod:`gateway.outbound.http1`).

Split from the pool so that what is written to and read from the wire, the part that must be
strict, is one module to review: request heads built from validated names and values, and
response heads, framing and bodies (chunked, ``Content-Length`` or until close) parsed within
the bounds and rules listed in :mod:`gateway.outbound.http1`. The pool and its connections
(sockets, keep-alive, waiting for a slot) stay there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

if TYPE_CHECKING:
    from gateway.outbound.http1 import Connection, Http1Pool

__all__ = [
    "MAX_FIELDS",
    "MAX_HEAD",
    "MAX_INFORMATIONAL",
    "MAX_LINE",
    "Http1Error",
    "Http1Response",
    "RequestHeads",
    "RequestTarget",
    "frame_response",
    "read_head",
]

MAX_LINE: Final = 8190
MAX_HEAD: Final = 65_536
MAX_FIELDS: Final = 100
MAX_INFORMATIONAL: Final = 16
"""1xx answers accepted before the final one of a call (more: a backend spinning the call)."""

_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_STATUS: Final = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: [^\r\n]*)?")
_NO_BODY: Final = frozenset({204, 304})
_BAD_VALUE: Final = re.compile(rb"[\r\n\0]")
# RFC 9110 §5.5: a field value is visible characters, SP, HTAB and obs-text; any other control
# character in a value we send is refused (a backend's parser may split or cut on it).
_BAD_REQUEST_VALUE: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
# RFC 9112 §7.1.1: a chunk-size line is the size and extensions (tokens, quoted strings,
# BWS); a bare LF or CR in it is the line-splitting differential of aiohttp's CVE-2024-52304.
_BAD_CHUNK_LINE: Final = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
_HEX: Final = re.compile(rb"[0-9A-Fa-f]{1,16}")
_DIGITS: Final = re.compile(r"[0-9]{1,18}")


class Http1Error(Exception):
    """``kind``: ``invalid`` (the request cannot be built), ``connection`` (connect, send or
    read failed, or the response is malformed)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class RequestTarget:
    """Where a request URL points: host, port, TLS, the ``Host`` field, the request path."""

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


class RequestHeads:
    """Builds request heads for one pool, caching parsed targets and the verdict on header
    names (both bounded: a pool sees the same few of each)."""

    def __init__(self, user_agent: str) -> None:
        self._user_agent = user_agent
        self._targets: dict[str, RequestTarget] = {}
        self._names: dict[str, bool] = {}

    def target(self, url: str) -> RequestTarget:
        target = self._targets.get(url)
        if target is None:
            target = RequestTarget(url)
            if len(self._targets) < 256:
                self._targets[url] = target
        return target

    def encode(
        self, method: str, target: RequestTarget, headers: Mapping[str, str] | None, length: int
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
            if not valid or _BAD_REQUEST_VALUE.search(value):
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


async def read_head(conn: Connection) -> tuple[int, int, list[tuple[str, str]]]:
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


def frame_response(
    pool: Http1Pool,
    conn: Connection,
    *,
    method: str,
    minor: int,
    status: int,
    fields: list[tuple[str, str]],
) -> Http1Response:
    """The response for a parsed head: its framing (RFC 9112 §6.3) decided, its body unread."""
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
        pool,
        conn,
        status,
        CIMultiDictProxy(headers),
        length=length,
        chunked=chunked,
        reusable=reusable,
    )


class Http1Response:
    """Status, headers, and the body as a stream of chunks (``readany``: ``b""`` at the end)."""

    def __init__(
        self,
        pool: Http1Pool,
        conn: Connection,
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
        self._conn: Connection | None = conn
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

    async def _read_chunk(self, conn: Connection) -> bytes:
        if self._left == 0:  # the CRLF after a chunk's data, then the next chunk's size line
            await _expect_crlf(conn)
            self._left = None
        if self._left is None:
            line = await _read_line(conn, MAX_LINE)
            size_text = line.split(b";", 1)[0].strip(b" \t")
            if not _HEX.fullmatch(size_text) or _BAD_CHUNK_LINE.search(line):
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


async def _read_line(conn: Connection, limit: int) -> bytes:
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


async def _expect_crlf(conn: Connection) -> None:
    while len(conn.buffer) < 2:
        if not await conn.more():
            raise Http1Error("connection", "connection closed mid-chunk")
    if conn.buffer[:2] != b"\r\n":
        raise Http1Error("connection", "malformed chunk")
    del conn.buffer[:2]


async def _skip_trailers(conn: Connection) -> None:
    total = 0
    while line := await _read_line(conn, MAX_LINE):
        if _BAD_VALUE.search(line):  # a trailer field is a field line: no bare CR, LF, NUL
            raise Http1Error("connection", "malformed response trailer")
        total += len(line)
        if total > MAX_HEAD:
            raise Http1Error("connection", "response trailers too large")
