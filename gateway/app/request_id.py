"""Request ids: taken from a trusted proxy's ``X-Request-Id`` or made here, bound to every log
line of the request and echoed in the response. Both listeners install it."""

from __future__ import annotations

import ipaddress
import itertools
import os
import re
import time
from typing import Final, Literal

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from gateway.observability.logging import get_logger

__all__ = [
    "REQUEST_ID",
    "REQUEST_ID_HEADER",
    "assign_request_id",
    "echo_request_id",
    "new_request_id",
    "request_id_middleware",
]

log = get_logger("gateway.app")

REQUEST_ID_HEADER: Final = "X-Request-Id"
_REQUEST_ID_RE: Final = re.compile(r"[A-Za-z0-9._-]{1,128}")
"""Accepted inbound request ids: short and token-safe (no log or header injection)."""

REQUEST_ID: Final = web.RequestKey("request_id", str)
"""The request id of the current request (also bound as ``request_id`` in structlog contextvars)."""


def _peer_is_trusted(
    request: web.Request,
    trusted: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...],
) -> bool:
    if not trusted or request.transport is None:
        return False
    # The TCP peer, not request.remote: forwarded headers must not vouch for themselves.
    peer = request.transport.get_extra_info("peername")
    if not isinstance(peer, tuple) or not peer:
        return False
    try:
        address = ipaddress.ip_address(peer[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in trusted)


_RID_PREFIX: Final = os.urandom(6).hex()
_rid_counter = itertools.count(1)


def new_request_id() -> str:
    """A per-process random prefix plus a counter: unique across replicas without a syscall."""
    return f"{_RID_PREFIX}{next(_rid_counter):020x}"  # 32 hex digits, like a uuid4 hex


def assign_request_id(
    request: web.Request,
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...],
) -> str:
    """The request's id: one already assigned, a trusted proxy's ``X-Request-Id`` (if short
    and token-safe), else a new one; stored under :data:`REQUEST_ID`."""
    rid: str | None = request.get(REQUEST_ID)
    if rid is not None:
        return rid
    offered = request.headers.get(REQUEST_ID_HEADER, "")
    if offered and _peer_is_trusted(request, trusted_proxies) and _REQUEST_ID_RE.fullmatch(offered):
        rid = offered
    else:
        rid = new_request_id()
    request[REQUEST_ID] = rid
    return rid


def request_id_middleware(
    *,
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...],
    access_level: Literal["debug", "info"] = "debug",
    skip_path: str | None = None,
) -> Middleware:
    """Take ``X-Request-Id`` from a trusted proxy (if short and token-safe), else make one.

    The id is stored under :data:`REQUEST_ID`, bound as ``request_id`` for every log line of the
    request, and echoed in the response's ``X-Request-Id`` (see :func:`echo_request_id`).
    ``skip_path`` (the MCP path, when its endpoint has an observer) is passed straight to its
    handler: the endpoint assigns the id itself (:func:`assign_request_id`), its observer binds
    it for the request's log lines and writes the access line, so this layer would only add
    work on the hot path (about 4 % of the CPU per call).
    """

    @web.middleware
    async def request_id(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == skip_path:
            return await handler(request)
        rid = assign_request_id(request, trusted_proxies)
        started = time.monotonic()
        status = 500
        with structlog.contextvars.bound_contextvars(request_id=rid):
            try:
                response = await handler(request)
                status = response.status
                return response
            except web.HTTPException as exc:
                status = exc.status
                raise
            finally:
                # With the MCP access line in place this generic line is debug-only: skip even
                # building its fields unless debug logging is on (it runs on every request).
                if log.is_enabled_for(level):
                    log.log(
                        level,
                        "http.request",
                        http_method=request.method,
                        path=request.path,
                        status=status,
                        duration_ms=round((time.monotonic() - started) * 1000, 2),
                    )

    level = _LEVEL_NUMBERS[access_level]
    return request_id


_LEVEL_NUMBERS: Final = {"debug": 10, "info": 20}


async def echo_request_id(request: web.Request, response: web.StreamResponse) -> None:
    # on_response_prepare also runs for streamed (SSE) and exception responses, before headers go.
    rid: str | None = request.get(REQUEST_ID)
    if rid is not None:
        response.headers[REQUEST_ID_HEADER] = rid
