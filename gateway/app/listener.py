"""The listeners' HTTP/1.1 connection layer: aiohttp's server with the gateway's bounds.

aiohttp's server reads request heads without a deadline, keeps idle connections for about an
hour, accepts up to 128 header lines of any allowed size (about 2 MiB per head) and any number of
connections, answers malformed requests with a plain-text 400 that echoes the offending bytes,
logs each one with a traceback, and decompresses request bodies on its own. None of that may
stand in front of authentication (issue 12: slowloris, header floods, 500s from
``Content-Encoding``, tokens in ERROR lines). :class:`~gateway.app.server.ListenerRunner` is an
:class:`aiohttp.web.AppRunner` whose server builds :class:`GuardedRequestHandler` connections:

- **header deadline** (``limits.header_timeout_s``): a connection must deliver a complete request
  head within the deadline, from its start for the first request and from the first byte for
  later ones; else ``408 request_timeout`` and close. Idle keep-alive connections are closed after
  ``limits.keepalive_timeout_s`` (aiohttp's own keep-alive timer, which also covers a partial head
  on a reused connection);
- **head size** (``limits.max_header_bytes``): bytes received while a head is incomplete are
  counted before they reach the parser, and every completed head is measured
  (:mod:`gateway.app.head_bounds`); past the cap ``431 headers_too_large`` and close. One line
  stays capped at 16 KiB by the parser;
- **connections** (``limits.max_connections`` per replica, ``limits.max_connections_per_ip`` per
  TCP peer, IPv6 per /64, peers in ``trusted_proxies`` exempt): counted at accept time, before
  a byte is read (``X-Forwarded-For`` is not known yet); over a cap the connection gets
  ``503 over_capacity`` / ``429 rate_limited`` and is closed without its request being read;
- **malformed HTTP**: the gateway's own fixed JSON ``400 malformed_request`` (``Cache-Control:
  no-store``, ``X-Request-Id``), one warning line at most per second with a count of the
  suppressed ones, never a traceback and never the request's bytes (which may hold a token,
  e.g. one split by obsolete line folding);
- **transfer codings**: a request with a transfer coding besides a single ``chunked`` (``gzip,
  chunked``, which aiohttp's parser accepts and de-chunks only) gets ``501
  unsupported_transfer_coding`` (RFC 9112 §6.1) and close;
- **no decompression**: ``auto_decompress`` is off, so a ``Content-Encoding`` body reaches the
  pipeline as sent and is refused there (``415 unsupported_content_encoding``).

How: refusals are queued as aiohttp's own parse-error entries, so aiohttp's request loop answers
them through :meth:`GuardedRequestHandler.handle_error` exactly like the parse errors it finds
itself: one response, then the connection closes, and no request handler ever runs for them.
This subclasses aiohttp internals (``RequestHandler._messages``, ``_request_count``,
``_ErrInfo``, ...) of the pinned 3.14 line; :mod:`gateway.app.aiohttp_internals` lists every one
and refuses to start on an aiohttp that lacks one, and the raw-socket tests
(tests/integration/front_door/test_hostile_http.py) exercise each path. The bounds as
configured, the connection counts and the log throttle are :mod:`gateway.app.connection_limits`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Final

from aiohttp import hdrs, web, web_protocol
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.streams import EMPTY_PAYLOAD, StreamReader
from aiohttp.web_protocol import RequestHandler

from gateway import SERVER_PRODUCT
from gateway.app.connection_limits import ConnectionCounts, ListenerLimits, LogThrottle
from gateway.app.fast_path import write_plain
from gateway.app.head_bounds import HeadCount, head_size, only_chunked
from gateway.app.request_id import REQUEST_ID, REQUEST_ID_HEADER, new_request_id
from gateway.errors import (
    GatewayError,
    HeadersTooLarge,
    MalformedRequest,
    OverCapacity,
    RequestTimeout,
    UnsupportedTransferCoding,
)
from gateway.http.error_response import internal_error, render_error
from gateway.observability.metrics import Metrics

if TYPE_CHECKING:
    from gateway.app.server import GuardedServer

__all__ = ["LINGER_S", "MAX_HEADER_FIELD_BYTES", "GuardedRequestHandler"]

MAX_HEADER_FIELD_BYTES: Final = 16_384
"""Largest request line / header line the parser accepts (aiohttp's default is 8190): an 8 KiB
bearer token (auth/bearer.py's cap) plus ``Authorization: Bearer `` must reach the gateway's own
401, not a 431."""
LINGER_S: Final = 2.0
LINGER_MAX_BYTES: Final = 65_536
"""After a listener answer, the connection is half-closed and what the client still sends is read
and dropped, for at most this long and this many bytes, before the socket closes: closing with
unread input would reset the connection and could destroy the answer in the client's buffer
(a lingering close, like nginx's ``lingering_close``)."""
FRESH_GRACE_S: Final = 1.0
"""When the listener stops, how long a connection accepted just before that has to deliver its
first request (a proxy writes it right after connecting) before it is closed unused."""


class _Refusal(Exception):
    """A listener-level answer queued in place of a request; carries its status-table row."""

    def __init__(self, error: GatewayError, reason: str) -> None:
        super().__init__(reason)
        self.error = error
        self.reason = reason


class GuardedRequestHandler(RequestHandler):
    """One client connection: aiohttp's handler plus the header deadline, head-size cap,
    connection accounting and the gateway's own answers to malformed requests."""

    __slots__ = (
        "_admitted",
        "_conn_key",
        "_connections",
        "_fresh_timer",
        "_head",
        "_head_timer",
        "_last_payload",
        "_limits",
        "_linger_bytes",
        "_linger_timer",
        "_lingering",
        "_metrics",
        "_server",
        "_throttle",
    )

    def __init__(
        self,
        manager: GuardedServer,
        *,
        limits: ListenerLimits,
        connections: ConnectionCounts,
        throttle: LogThrottle,
        metrics: Metrics | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(manager, **kwargs)
        self._server = manager
        self._limits = limits
        self._metrics = metrics
        self._connections = connections
        self._throttle = throttle
        self._admitted = False
        self._conn_key: str | None = None
        self._head = HeadCount()
        self._head_timer: asyncio.TimerHandle | None = None
        self._last_payload: StreamReader | None = None
        self._lingering = False
        """The next response is a listener answer: close the connection lingering after it."""
        self._linger_bytes = 0
        self._linger_timer: asyncio.TimerHandle | None = None
        self._fresh_timer: asyncio.TimerHandle | None = None

    # --- connection accounting -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        address = peer[0] if isinstance(peer, tuple) and peer else None
        self._conn_key, refusal = self._connections.admit(address)
        if refusal is not None:
            reason = "max_connections" if isinstance(refusal, OverCapacity) else "per_ip"
            self._refuse(_Refusal(refusal, reason))
            return
        self._admitted = True
        self._arm_head_timer()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_head_timer()
        if self._fresh_timer is not None:
            self._fresh_timer.cancel()
            self._fresh_timer = None
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        if self._admitted:
            self._admitted = False
            self._connections.release(self._conn_key)
        super().connection_lost(exc)

    def stop_serving(self) -> None:
        """A graceful stop (the server is closing: every answer closes its connection). An idle
        kept-alive connection closes now; a busy one after its answer; one that has not
        delivered its first request yet (accepted just before the listener closed: a proxy
        writes its request right after connecting) gets :data:`FRESH_GRACE_S` to do so.
        (aiohttp's own ``close()`` would stop reading, dropping a request still arriving, and
        leave an idle connection open until the runner's final shutdown.)"""
        if self.transport is None or self._force_close:
            return
        if self._request_count == 0:
            if self._fresh_timer is None:
                self._fresh_timer = self._loop.call_later(FRESH_GRACE_S, self._close_if_unused)
            return
        if self._request_in_progress or self._messages:
            return
        if self._waiter is None:
            # Between two steps of aiohttp's request loop (a request just taken from the
            # queue, or an answer just written): look again once it has made that step.
            self._loop.call_soon(self.stop_serving)
            return
        self.close()
        self.force_close()

    def _close_if_unused(self) -> None:
        self._fresh_timer = None
        if self._request_count == 0 and self.transport is not None:
            self.close()
            self.force_close()

    # --- request heads -----------------------------------------------------------------------

    def _awaiting_head(self) -> bool:
        payload = self._last_payload
        return not self._upgraded and (payload is None or payload.is_eof())

    def data_received(self, data: bytes) -> None:
        if self._linger_timer is not None:
            self._linger_bytes += len(data)  # dropped; a client that keeps sending is cut
            if self._linger_bytes > LINGER_MAX_BYTES and self.transport is not None:
                self.transport.abort()
            return
        if self._force_close or self._close or not data:
            super().data_received(data)
            return
        awaiting = self._awaiting_head()
        counted = self._head.counted
        if awaiting and not self._head.fits(data, self._limits.max_header_bytes):
            self._refuse(_Refusal(HeadersTooLarge(), "head_over_cap"))
            return
        before = self._request_count
        super().data_received(data)
        if self._request_count == before:
            if awaiting and self._head_timer is None:
                self._arm_head_timer()  # a later request's head began and is not complete yet
            return
        # One or more heads completed in this chunk: measure them, then start over. (The common
        # case, a whole head in one read, never arms a timer.)
        self._cancel_head_timer()
        self._check_completed_heads(
            self._request_count - before, sizes=counted + len(data) > self._limits.max_header_bytes
        )
        if self._messages:
            self._last_payload = self._messages[-1][1]
        self._head.restart(data, awaiting=self._awaiting_head())

    def _check_completed_heads(self, count: int, *, sizes: bool) -> None:
        """Refuse the first of the ``count`` heads just parsed that is over the size cap
        (measured only when ``sizes``: the bytes received could exceed it) or names a transfer
        coding besides ``chunked``; it and anything pipelined behind it are never handled."""
        cap = self._limits.max_header_bytes
        queued = self._messages
        for index in range(max(0, len(queued) - count), len(queued)):
            message = queued[index][0]
            if isinstance(message, web_protocol._ErrInfo):
                continue  # a parse error: answered 400 anyway
            refusal: _Refusal | None = None
            if sizes and head_size(message.method, message.path, message.raw_headers) > cap:
                refusal = _Refusal(HeadersTooLarge(), "head_over_cap")
            elif message.chunked and not only_chunked(message.headers):
                refusal = _Refusal(UnsupportedTransferCoding(), "transfer_coding")
            if refusal is not None:
                while len(queued) > index:
                    queued.pop()
                self._refuse(refusal)
                return

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self._loop.call_later(
            self._limits.header_timeout_s, self._head_timed_out
        )

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._force_close or self._close or not self._awaiting_head():
            return
        if self._request_in_progress or self._messages:
            return  # a request is being answered; aiohttp's keep-alive timer takes over after it
        self._refuse(_Refusal(RequestTimeout(), "header_timeout"))

    # --- answers -----------------------------------------------------------------------------

    def _refuse(self, refusal: _Refusal) -> None:
        """Queue ``refusal`` as aiohttp's own parse-error entry, stop reading, wake the loop.

        aiohttp's request loop answers it through :meth:`handle_error` (which closes the
        connection afterwards), so no handler runs and the response is written by aiohttp.
        """
        self._cancel_head_timer()
        entry = web_protocol._ErrInfo(status=refusal.error.status, exc=refusal, message="")
        self._messages.append((entry, EMPTY_PAYLOAD))
        self._request_count += 1
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self._close = True  # read no more; the response goes out, then the connection closes

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """The gateway's fixed JSON answer for everything aiohttp (or :meth:`_refuse`) answers
        before a handler runs, and for a handler that raised past the pipeline."""
        peer = request.remote
        if isinstance(exc, _Refusal):
            error: GatewayError = exc.error
            self._throttle.warning(
                "http.refused", reason=exc.reason, status=error.status, peer=peer
            )
        elif isinstance(exc, LineTooLong):
            error = HeadersTooLarge()
            self._throttle.warning("http.refused", reason="line_over_cap", status=431, peer=peer)
        elif isinstance(exc, HttpProcessingError) and status == 400:
            # Only the exception's class: its text quotes the request's bytes.
            error = MalformedRequest()
            self._throttle.warning("http.refused", reason=type(exc).__name__, status=400, peer=peer)
        else:
            # A handler raised past the pipeline (the MCP endpoint never does): a bug, logged
            # with its traceback by internal_error.
            error = internal_error(exc or RuntimeError(f"aiohttp error {status}"))
        if self._metrics is not None:
            row = self._metrics.row_label(error.row)
            if row is not None:
                self._metrics.rejections_total.labels(row).inc()
            if isinstance(exc, _Refusal) and exc.reason == "per_ip":
                self._metrics.rate_limited_total.labels(scope="ip_connections").inc()
        self._lingering = True
        response = render_error(error, challenge=None)
        rid = request.get(REQUEST_ID) if isinstance(request, web.Request) else None
        response.headers[REQUEST_ID_HEADER] = rid or new_request_id()
        response.force_close()
        return response

    async def finish_response(
        self, request: Any, resp: web.StreamResponse, start_time: float | None
    ) -> tuple[web.StreamResponse, bool]:
        closing = self._server.closing
        if not resp.prepared:  # (a stream prepared by its handler set both itself)
            resp.headers[hdrs.SERVER] = SERVER_PRODUCT  # before aiohttp's default would go in
            if closing:
                resp.force_close()  # a request that began before the shutdown delay did
        reset = None if self._upgraded else await write_plain(request, resp)
        if reset is None:
            result = await super().finish_response(request, resp, start_time)
        else:
            self.log_access(request, resp, start_time)
            result = (resp, reset)
        if closing:
            self._close = True  # also after a stream prepared before: no next request
        transport = self.transport
        if self._lingering and transport is not None and not transport.is_closing():
            # A lingering close instead of aiohttp's immediate one: half-close (the client reads
            # the answer and EOF), drop what it still sends, close after LINGER_S at the latest
            # (or when it closes its side: eof_received). Marked force-closed so aiohttp's
            # request loop ends without closing the transport itself.
            self._force_close = True
            if transport.can_write_eof():
                transport.write_eof()
            self._linger_timer = self._loop.call_later(LINGER_S, transport.abort)
        return result

    def log_exception(self, *args: Any, **kw: Any) -> None:
        # aiohttp's request loop reports connection-level failures here (a body that broke off,
        # bad chunk framing found while draining a refused request's body). Their text and
        # traceback may quote request bytes: log the kind only, throttled.
        exc = kw.get("exc_info")
        kind = type(exc).__name__ if isinstance(exc, BaseException) else "unknown"
        self._throttle.warning("http.connection_error", reason=kind)
