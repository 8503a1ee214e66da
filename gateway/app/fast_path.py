"""The MCP path's short way through aiohttp's server: its route, and the write of its answers.

Two per-request costs of aiohttp's general machinery that the MCP path does not need (issue 18:
py-spy on the 401 path put them at about a seventh of the CPU per answer):

- **routing** (:func:`mcp_lane`): :meth:`aiohttp.web.Application._handle` resolves the route,
  builds and freezes a match info and enters the middleware chain for every request. A request
  whose raw target is exactly the MCP path (no query string, no percent-encoding, no ``Expect``)
  goes straight to the route's handler with the route's match info, built once. The lane exists
  only where the public application's one middleware passes that path through unchanged
  (``request_id_middleware``'s ``skip_path``, set when the endpoint's observer writes the access
  line), so nothing runs differently; every other request takes the application's handler.
- **the answer** (:func:`write_plain`): a plain :class:`aiohttp.web.Response` with a ``bytes``
  body to a POST (every answer of the MCP endpoint except an SSE stream) is written with the
  headers aiohttp's ``StreamResponse.prepare`` gives it (``Content-Length``, ``Content-Type``,
  ``Date``, ``Server``, ``Connection`` by keep-alive and HTTP version, then the applications'
  ``on_response_prepare`` signals), serialised by aiohttp's own header serialiser (which
  refuses CR and LF in any name or value), in the one ``write`` aiohttp makes, without the
  response and writer state machines around it. Anything else (HEAD, 1xx/204/304, a streamed,
  compressed, chunked or cookie-carrying response, a ``Content-Length`` set by hand) is
  prepared by aiohttp as usual.

Both use aiohttp internals of the pinned 3.14 line (``Request._match_info``, ``_prepare_hook``,
``_payload_writer``, ``http_writer._serialize_headers``, ...), each listed and checked at import by
:mod:`gateway.app.aiohttp_internals`; the front-door tests exercise both ways.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import HttpVersion10, HttpVersion11, hdrs, web
from aiohttp.helpers import rfc822_formatted_time
from aiohttp.http import SERVER_SOFTWARE
from aiohttp.http_writer import _serialize_headers
from aiohttp.web_urldispatcher import PlainResource, UrlMappingMatchInfo

__all__ = ["MCP_LANE", "mcp_lane", "write_plain"]

Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]

MCP_LANE: Final = web.AppKey("mcp_lane", str)
"""Set on the public application to its MCP path when the path may take the lane."""

_PLAIN_PATH: Final = re.compile(r"/[A-Za-z0-9._~/-]*")
"""A path that is its own raw form (nothing to decode), so raw and routed paths are equal."""


def mcp_lane(app: web.Application, fallback: Handler) -> Handler:
    """``fallback`` (the application's handler), with the lane for ``app[MCP_LANE]`` in front
    when the application marks it and routes it to one handler for every method."""
    path = app.get(MCP_LANE)
    if path is None or not _PLAIN_PATH.fullmatch(path):
        return fallback
    routes = [
        route
        for resource in app.router.resources()
        if isinstance(resource, PlainResource) and resource.canonical == path
        for route in resource
    ]
    if len(routes) != 1 or routes[0].method != hdrs.METH_ANY:
        return fallback
    route = routes[0]
    match_info = UrlMappingMatchInfo({}, route)
    match_info.add_app(app)
    match_info.freeze()
    handler = route.handler

    async def lane(request: web.BaseRequest) -> web.StreamResponse:
        if request.raw_path != path or hdrs.EXPECT in request.headers:
            return await fallback(request)
        request._match_info = match_info  # type: ignore[attr-defined]
        return await handler(request)  # type: ignore[arg-type]

    return lane


async def write_plain(request: web.BaseRequest, response: web.StreamResponse) -> bool | None:
    """Write ``response`` to ``request``'s connection in one write, as aiohttp would.

    None: not a plain answer, aiohttp must prepare it. Otherwise whether the client went away
    before it could be written (aiohttp's ``finish_response`` "reset").
    """
    if type(response) is not web.Response or response.prepared:
        return None
    body = response._body
    status = response.status
    headers = response._headers
    if (
        body.__class__ is not bytes
        or request.method != hdrs.METH_POST
        or status < 200
        or status in (204, 304)
        or response._compression
        or response._chunked
        or response._cookies
        or hdrs.CONTENT_LENGTH in headers
    ):
        return None
    request._finish()
    keep_alive = response.keep_alive
    if keep_alive is None:
        keep_alive = request.keep_alive
    response._keep_alive = keep_alive
    version = request.version
    headers[hdrs.CONTENT_LENGTH] = str(len(body))
    if body:
        headers.setdefault(hdrs.CONTENT_TYPE, "application/octet-stream")
    if hdrs.DATE not in headers:
        headers[hdrs.DATE] = rfc822_formatted_time()
    headers.setdefault(hdrs.SERVER, SERVER_SOFTWARE)
    if hdrs.CONNECTION not in headers:
        if keep_alive:
            if version == HttpVersion10:
                headers[hdrs.CONNECTION] = "keep-alive"
        elif version == HttpVersion11:
            headers[hdrs.CONNECTION] = "close"
    await request._prepare_hook(response)
    head = _serialize_headers(f"HTTP/{version[0]}.{version[1]} {status} {response.reason}", headers)
    transport = request.transport
    if transport is None or transport.is_closing():
        return True
    transport.write(head + body)
    response._eof_sent = True
    response._body_length = len(body)
    await request._payload_writer.drain()
    return False
