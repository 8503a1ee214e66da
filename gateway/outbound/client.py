"""The pooled outbound client: one pool per destination kind, every call under a deadline.

A :class:`Destination` is added once at startup; :class:`Outbound` keeps an
:class:`aiohttp.ClientSession` for it, or for a ``lean`` one the HTTP/1.1 pool of
:mod:`gateway.outbound.http1`, and closes them at shutdown. :func:`post_json_once` is the one
call with a client of its own (the CLI's one-shot commands).
"""

from __future__ import annotations

import ssl
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from gateway.deadlines import deadline_at
from gateway.jsonkit.read import JsonError, answer
from gateway.jsonkit.write import compact
from gateway.observability import spans
from gateway.outbound.failures import (
    OutboundConnectionError,
    OutboundError,
    OutboundInvalidRequest,
    OutboundRedirect,
    OutboundTimeout,
    ResponseTooLarge,
)
from gateway.outbound.http1 import Http1Pool
from gateway.outbound.http1_codec import Http1Error
from gateway.outbound.responses import DEFAULT_MAX_BODY, BodyReader, Response, StreamingResponse

__all__ = ["Destination", "Outbound", "post_json_once", "server_of"]


@dataclass(frozen=True, slots=True)
class Destination:
    """One destination kind (issuer, backend, ...) and its connection settings."""

    name: str
    connect_timeout_s: float = 3.0
    max_connections: int = 100
    ssl_context: ssl.SSLContext | None = None
    """Custom CA or mTLS client certificate; built once at startup, never per call."""
    unix_socket: str | None = None
    """Connect to this Unix socket path instead of the URL's host and port (the supervisor of
    ``serve --workers N`` talks to each worker's private ops listener this way)."""
    lean: bool = False
    """Use the lean HTTP/1.1 client (:mod:`gateway.outbound.http1`) instead of aiohttp's: for
    the hot path's destinations (the backends). Ignored with ``unix_socket``."""


class Outbound:
    """Pooled client sessions, one per destination kind. Start once; close at shutdown."""

    def __init__(self, user_agent: str = "mcp-resource-gateway") -> None:
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self._lean: dict[str, Http1Pool] = {}
        self._user_agent = user_agent

    def add(self, destination: Destination) -> None:
        if destination.name in self._sessions or destination.name in self._lean:
            return
        if destination.lean and destination.unix_socket is None:
            self._lean[destination.name] = Http1Pool(
                limit=destination.max_connections,
                connect_timeout_s=destination.connect_timeout_s,
                ssl_context=destination.ssl_context,
                user_agent=self._user_agent,
            )
            return
        connector: aiohttp.BaseConnector
        if destination.unix_socket is not None:
            connector = aiohttp.UnixConnector(
                destination.unix_socket, limit=destination.max_connections
            )
        else:
            connector = aiohttp.TCPConnector(
                limit=destination.max_connections,
                ssl=destination.ssl_context if destination.ssl_context is not None else True,
                enable_cleanup_closed=True,
            )
        self._sessions[destination.name] = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=destination.connect_timeout_s),
            headers={"User-Agent": self._user_agent},
            auto_decompress=False,
            max_line_size=8190,
            max_field_size=8190,
            cookie_jar=aiohttp.DummyCookieJar(),
        )

    async def close(self) -> None:
        sessions, self._sessions = self._sessions, {}
        for session in sessions.values():
            await session.close()
        pools, self._lean = self._lean, {}
        for pool in pools.values():
            await pool.close()

    def _session(self, destination: str) -> aiohttp.ClientSession:
        try:
            return self._sessions[destination]
        except KeyError:
            raise OutboundError(f"unknown destination {destination!r}") from None

    async def request(
        self,
        destination: str,
        method: str,
        url: str,
        *,
        timeout_s: float,
        headers: Mapping[str, str] | None = None,
        data: Any = None,
        body: bytes | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        span: str | None = None,
    ) -> Response:
        """Send one request and read the whole (capped) body within ``timeout_s``.

        ``span``: the name of the CLIENT span this request is in a traced request
        (:mod:`gateway.observability.spans`), with ``server.address``/``server.port`` and the
        response status; never the URL's query, a header or a body."""
        deadline = time.monotonic() + timeout_s
        with spans.child(span, kind="client") if span is not None else spans.NO_SPAN as traced:
            if traced is not spans.NO_SPAN:
                host, port = server_of(url)
                traced.set("server.address", host)
                traced.set("server.port", port)
                traced.set("http.request.method", method)
            async with self.stream(
                destination,
                method,
                url,
                deadline=deadline,
                headers=headers,
                data=data,
                body=body,
                max_body=max_body,
            ) as response:
                traced.set("http.response.status_code", response.status)
                return Response(response.status, response.headers, await response.read())

    @asynccontextmanager
    async def stream(
        self,
        destination: str,
        method: str,
        url: str,
        *,
        deadline: float,
        headers: Mapping[str, str] | None = None,
        data: Any = None,
        body: bytes | None = None,
        max_body: int = DEFAULT_MAX_BODY,
    ) -> AsyncIterator[StreamingResponse]:
        """Open a request whose body is read incrementally; closes the connection on exit.

        Leaving the block early (cancellation, a client disconnect) releases the connection
        without reading the rest, which aborts the upstream request.
        """
        lean = self._lean.get(destination)
        session = self._session(destination) if lean is None else None
        if deadline - time.monotonic() <= 0:
            raise OutboundTimeout("deadline exceeded")
        payload = body if body is not None else data
        if lean is not None and payload is not None and not isinstance(payload, bytes):
            raise OutboundInvalidRequest("the lean client sends bytes bodies only")
        try:
            # One timer for the whole exchange: connecting, sending, and the caller reading the
            # body inside the block. On expiry the task is cancelled wherever it waits and the
            # cancellation surfaces here as TimeoutError.
            with deadline_at(deadline):
                if lean is not None:
                    reader = await _send_lean(lean, method, url, headers, payload)
                else:
                    assert session is not None
                    reader = await _send(session, method, url, headers, payload)
                streaming: StreamingResponse | None = None
                try:
                    if 300 <= reader.status < 400:
                        raise OutboundRedirect("redirect refused")
                    length = reader.content_length
                    if length is not None and length > max_body:
                        raise ResponseTooLarge("response exceeds the size cap")
                    streaming = StreamingResponse(
                        reader.status, reader.headers, reader, max_body, deadline
                    )
                    yield streaming
                finally:
                    reader.finish(streaming is not None and streaming.done)
        except OutboundTimeout:
            raise
        except TimeoutError as exc:
            raise OutboundTimeout("deadline exceeded") from exc


async def _send(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    headers: Mapping[str, str] | None,
    payload: Any,
) -> BodyReader:
    """The request on aiohttp's client, its errors as :mod:`gateway.outbound.failures`."""
    try:
        response = await session.request(
            method, url, headers=headers, data=payload, allow_redirects=False
        )
    except aiohttp.InvalidURL as exc:
        raise OutboundInvalidRequest("invalid request URL") from exc
    except aiohttp.ClientError as exc:
        raise OutboundConnectionError("connection failed") from exc
    except (ValueError, TypeError) as exc:
        # aiohttp builds the request before connecting and raises plain ValueError
        # e.g. for "user@host" URLs combined with an Authorization header.
        raise OutboundInvalidRequest("request could not be built") from exc
    return BodyReader(aiohttp_response=response)


async def _send_lean(
    pool: Http1Pool,
    method: str,
    url: str,
    headers: Mapping[str, str] | None,
    payload: bytes | None,
) -> BodyReader:
    """The request on the lean client, its errors as :mod:`gateway.outbound.failures`."""
    try:
        response = await pool.request(method, url, headers, payload)
    except Http1Error as exc:
        if exc.kind == "invalid":
            raise OutboundInvalidRequest(str(exc)) from None
        raise OutboundConnectionError("connection failed") from exc
    return BodyReader(lean=response)


def server_of(url: str) -> tuple[str, int]:
    """The host and port a URL's requests go to (a span's ``server.address``/``server.port``):
    the scheme's default port where the URL names none."""
    parts = urlsplit(url)
    return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)


async def post_json_once(
    url: str,
    payload: Mapping[str, Any],
    *,
    bearer: str,
    user_agent: str,
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One JSON ``POST`` with a bearer credential on a client of its own (the CLI's one-shot
    commands): the status and the reply's JSON object, ``{}`` when the reply is not one.
    ``headers``: more request headers (a DPoP proof)."""
    outbound = Outbound(user_agent=user_agent)
    outbound.add(Destination("once", connect_timeout_s=3.0))
    try:
        response = await outbound.request(
            "once",
            "POST",
            url,
            timeout_s=timeout_s,
            headers={
                **(headers or {}),
                "Authorization": f"Bearer {bearer}",
                "Content-Type": "application/json",
            },
            body=compact(payload),
            max_body=65_536,
        )
    finally:
        await outbound.close()
    try:
        return response.status, answer(response.content_type, response.body)
    except JsonError:
        return response.status, {}
