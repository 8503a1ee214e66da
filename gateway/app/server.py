"""The listeners' servers: aiohttp's low-level server and runner, building the guarded
connections of :mod:`gateway.app.listener`, with the MCP path's lane in front of the
application's router (:mod:`gateway.app.fast_path`). The aiohttp internals used here (the
server's ``_kwargs``, the runner's ``_make_server``, ...) are listed and checked at import by
:mod:`gateway.app.aiohttp_internals`."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any, Final

from aiohttp import HttpVersion11, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import ERROR, RequestHandler

from gateway.app.connection_limits import ConnectionCounts, ListenerLimits, LogThrottle
from gateway.app.fast_path import mcp_lane
from gateway.app.listener import LINGER_S, MAX_HEADER_FIELD_BYTES, GuardedRequestHandler
from gateway.app.syn_filter import refuse_new_connections
from gateway.observability.metrics import Metrics

__all__ = ["GuardedServer", "ListenerRunner"]

_ERROR_11: Final = ERROR._replace(version=HttpVersion11)
"""aiohttp's placeholder for the requests it answers itself, as HTTP/1.1."""


class GuardedServer(web.Server):
    """aiohttp's low-level server building :class:`GuardedRequestHandler` connections."""

    def __init__(
        self, *args: Any, limits: ListenerLimits, metrics: Metrics | None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.metrics = metrics
        self.connection_counts = ConnectionCounts(limits)
        self._throttle = LogThrottle()
        self.closing = False
        """Set by :meth:`close_keepalive`: every answer from now on closes its connection."""
        self._make = self.request_factory
        self.request_factory = self._request
        self._taken: set[asyncio.Task[None]] = set()

    def close_keepalive(self) -> None:
        """Stop keeping connections alive (the shutdown delay starts): every answer from now on
        carries ``Connection: close`` and its connection closes after it, so a proxy stops
        reusing its connections to this replica while the listener still accepts new ones.
        Idle connections stay open (a proxy may be writing a request on one this very moment)
        until :meth:`pre_shutdown`."""
        self.closing = True

    def _request(
        self,
        message: RawRequestMessage,
        payload: StreamReader,
        protocol: RequestHandler,
        writer: AbstractStreamWriter,
        task: asyncio.Task[None],
    ) -> web.BaseRequest:
        if message is ERROR:
            # What aiohttp answers itself (a malformed request, the listener's refusals) is
            # built on this placeholder message, whose version, 1.0, the status line copies.
            # RFC 9112 §2.3: answer in the highest version the server supports.
            message = _ERROR_11
        if self.closing:
            # The request's keep-alive decides its response's, streamed (SSE) ones included,
            # which are prepared inside the handler.
            message = message._replace(should_close=True)
        return self._make(message, payload, protocol, writer, task)

    def refuse_new(self, site: web.BaseSite) -> bool:
        """Let no new connection start on ``site``'s listening sockets while the handshakes
        under way complete and are accepted (:mod:`gateway.app.syn_filter`); True when done for
        every one of them. Called when the listener stops accepting, before
        :meth:`take_pending` and the close."""
        sockets = getattr(site._server, "sockets", None) or ()
        attached = [refuse_new_connections(listening) for listening in sockets]  # each one
        return bool(attached) and all(attached)

    def take_pending(self, site: web.BaseSite) -> int:
        """Accept the connections queued on ``site``'s listening sockets and serve them, just
        before the site closes; how many were taken.

        Closing a listening socket resets the connections the kernel has completed but the
        loop has not accepted yet, and a proxy has usually written its request on them
        already (a 502: nginx does not retry a POST it sent). Taken here, they are served
        like any other (their answers close them); after :meth:`refuse_new` no connection
        can complete between this and the close (without it, one can: a replica descheduled
        in between resets all of them). ``BaseSite._server`` is the site's asyncio server
        (guarded in :mod:`gateway.app.aiohttp_internals`).
        """
        listener = site._server
        loop = asyncio.get_running_loop()
        taken = 0
        for listening in getattr(listener, "sockets", None) or ():
            try:
                sock = socket.socket(fileno=os.dup(listening.fileno()))
            except OSError:
                continue
            with sock:
                sock.setblocking(False)
                while True:
                    try:
                        conn, _ = sock.accept()
                    except OSError:  # BlockingIOError: the queue is empty
                        break
                    conn.setblocking(False)
                    task = loop.create_task(self._serve_taken(conn))
                    self._taken.add(task)
                    task.add_done_callback(self._taken.discard)
                    taken += 1
        return taken

    async def _serve_taken(self, conn: socket.socket) -> None:
        try:
            _, handler = await asyncio.get_running_loop().connect_accepted_socket(self, conn)
        except OSError:
            conn.close()
            return
        if self.closing and isinstance(handler, GuardedRequestHandler):
            handler.stop_serving()  # what pre_shutdown did to the others

    async def settle(self) -> None:
        """Wait until the connections :meth:`take_pending` took are set up (and counted)."""
        if self._taken:
            await asyncio.gather(*self._taken, return_exceptions=True)

    def pre_shutdown(self) -> None:
        self.closing = True
        for connection in self.connections:
            if isinstance(connection, GuardedRequestHandler):
                connection.stop_serving()
            else:
                connection.close()

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no admitted connection is open, at most ``timeout_s``; True if idle."""
        try:
            async with asyncio.timeout(max(0.0, timeout_s)):
                await self.connection_counts.idle.wait()
        except TimeoutError:
            return False
        return True

    def __call__(self) -> RequestHandler:
        return GuardedRequestHandler(
            self,
            loop=self._loop,
            limits=self.limits,
            connections=self.connection_counts,
            throttle=self._throttle,
            metrics=self.metrics,
            **self._kwargs,
        )


class ListenerRunner(web.AppRunner):
    """An :class:`~aiohttp.web.AppRunner` serving its application through :class:`GuardedServer`
    with the gateway's connection bounds (see the module docstring)."""

    def __init__(
        self,
        app: web.Application,
        *,
        limits: ListenerLimits,
        metrics: Metrics | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("handler_cancellation", True)
        kwargs.setdefault("access_log", None)  # the request-id middleware logs each request
        super().__init__(
            app,
            keepalive_timeout=limits.keepalive_timeout_s,
            auto_decompress=False,
            # After an answer that left the body unread (a 401 before the body), aiohttp reads
            # and drops the rest for this long (default 10 s): as long as our own linger.
            lingering_time=LINGER_S,
            max_field_size=MAX_HEADER_FIELD_BYTES,
            max_line_size=MAX_HEADER_FIELD_BYTES,
            **kwargs,
        )
        self._limits = limits
        self._metrics = metrics

    async def _make_server(self) -> web.Server:
        # AppRunner's server, rebuilt as a GuardedServer with the same handler and settings
        # (BaseRunner._make_server is the runner's documented extension point).
        base = await super()._make_server()
        kwargs = {k: v for k, v in self._kwargs.items() if k != "handler_cancellation"}
        return GuardedServer(
            mcp_lane(self._app, base.request_handler),
            request_factory=base.request_factory,
            handler_cancellation=base.handler_cancellation,
            limits=self._limits,
            metrics=self._metrics,
            **kwargs,
        )
