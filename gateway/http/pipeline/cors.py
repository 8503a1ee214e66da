"""CORS for browser clients (``cors.enabled``): the Fetch standard's answers, for trusted origins.

One list of trusted browser origins: :attr:`gateway.config.Config.trusted_origins`
(``allowed_origins`` plus the resource's own origin), the list the Origin check of pipeline
step 3 enforces. An origin off that list gets no CORS header at all, so the browser refuses the
page any answer; its requests get the ``403 origin_forbidden`` they get without CORS.

- **Preflight** (Fetch §4.8, CORS-preflight fetch): ``OPTIONS`` with an ``Origin`` and an
  ``Access-Control-Request-Method`` is answered by :meth:`Cors.preflight` before
  authentication (a browser never sends credentials on a preflight): ``204`` with the methods,
  the request headers an MCP client sends (:data:`ALLOWED_HEADERS`, plus the ``Mcp-Param-*``
  names it asks for: 2026-07-28 streamable-http.mdx §Schema Extension derives them from tool
  schemas, so no fixed list can hold them, and ``Access-Control-Allow-Headers`` has no
  pattern syntax) and ``Access-Control-Max-Age``. GET and DELETE are listed so that a legacy
  client's stream probe and session close read the 405 the gateway answers (the TypeScript
  SDK treats a 405 as "not offered"; a CORS failure would be an error).
- **Every answer** (:meth:`Cors.on_response_prepare`, an ``on_response_prepare`` signal, so the
  MCP path's one-write answers of :mod:`gateway.app.fast_path`, aiohttp's own path, SSE streams
  and the protected-resource metadata get it alike): ``Access-Control-Allow-Origin`` (the
  trusted origin, never ``*``), ``Access-Control-Expose-Headers`` (:data:`EXPOSED_HEADERS`: the
  401 challenge, ``Retry-After`` of 429/503, ...), and ``Vary: Origin`` on every answer, for a
  trusted origin or not (Fetch §3.2.5: a cache must not hand one origin's answer to another).

No ``Access-Control-Allow-Credentials``: MCP clients authenticate with a bearer token in
``Authorization``, never with cookies, so a page's ambient credentials are not sent.
"""

from __future__ import annotations

import re
from typing import Final

from aiohttp import web

from gateway.config import Config
from gateway.errors import OriginForbidden

__all__ = ["ALLOWED_HEADERS", "EXPOSED_HEADERS", "MCP_METHODS", "PRM_METHODS", "Cors"]

MCP_METHODS: Final = "POST, GET, DELETE"
PRM_METHODS: Final = "GET, HEAD"
ALLOWED_HEADERS: Final = (
    "Authorization",
    "Content-Type",
    "Mcp-Protocol-Version",
    "Mcp-Session-Id",
    "Mcp-Method",
    "Mcp-Name",
    "Last-Event-ID",
    "traceparent",
    "tracestate",
)
"""What an MCP client sends besides CORS-safelisted headers (Accept is safelisted)."""
EXPOSED_HEADERS: Final = "WWW-Authenticate, Mcp-Session-Id, Retry-After, X-Request-Id"
PRM_ALLOWED_HEADERS: Final = "Mcp-Protocol-Version"
"""The TypeScript SDK sends it on its metadata discovery requests."""

MAX_PARAM_HEADERS: Final = 32
_PARAM_HEADER: Final = re.compile(r"mcp-param-[!#$%&'*+.^_`|~0-9a-z-]{1,64}")
"""``Mcp-Param-{Name}``, Name a field-name token (RFC 9110 §5.1), as a browser lowercases it."""

_ALLOW_ORIGIN: Final = "Access-Control-Allow-Origin"
_PREFLIGHT_VARY: Final = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"


class Cors:
    """The CORS answers of one configuration (``cors.enabled``)."""

    __slots__ = ("_allowed", "_max_age", "_trusted")

    def __init__(self, config: Config) -> None:
        self._trusted = config.trusted_origins
        self._max_age = str(config.cors.max_age_s)
        self._allowed = ", ".join(ALLOWED_HEADERS)

    def trusted(self, origin: str | None) -> str | None:
        """The trusted origin ``origin`` names (as the Origin check compares it), or None."""
        if origin is None:
            return None
        normalised = origin.strip().lower().rstrip("/")
        return normalised if normalised in self._trusted else None

    async def on_response_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        headers = response.headers
        if "Vary" not in headers:
            headers["Vary"] = "Origin"
        origin = self.trusted(request.headers.get("Origin"))
        if origin is None:
            # The metadata route's static "*" is for a gateway without CORS configured.
            headers.pop(_ALLOW_ORIGIN, None)
            return
        # The list's own spelling, never the request's bytes (a browser sends the same).
        headers[_ALLOW_ORIGIN] = origin
        headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS

    def is_preflight(self, request: web.Request) -> bool:
        """An ``OPTIONS`` a browser sends before a cross-origin request (Fetch §4.8)."""
        headers = request.headers
        return (
            request.method == "OPTIONS"
            and "Origin" in headers
            and "Access-Control-Request-Method" in headers
        )

    def preflight(self, request: web.Request) -> web.Response:
        """The preflight answer for the MCP path; an untrusted origin is ``403
        origin_forbidden`` (no CORS header: the browser fails the request it announced)."""
        if self.trusted(request.headers.get("Origin")) is None:
            raise OriginForbidden()
        allowed = self._allowed
        params = _param_headers(request.headers.getall("Access-Control-Request-Headers", ()))
        if params:
            allowed = f"{allowed}, {', '.join(params)}"
        return self._answer(MCP_METHODS, allowed)

    def metadata_preflight(self, request: web.Request) -> web.Response:
        """The preflight answer for the protected-resource metadata paths."""
        if self.trusted(request.headers.get("Origin")) is None:
            raise OriginForbidden()
        return self._answer(PRM_METHODS, PRM_ALLOWED_HEADERS)

    def _answer(self, methods: str, allowed: str) -> web.Response:
        return web.Response(
            status=204,
            headers={
                "Access-Control-Allow-Methods": methods,
                "Access-Control-Allow-Headers": allowed,
                "Access-Control-Max-Age": self._max_age,
                "Vary": _PREFLIGHT_VARY,
                "Cache-Control": "no-store",
            },
        )


def _param_headers(lines: tuple[str, ...] | list[str]) -> list[str]:
    """The ``Mcp-Param-*`` names of ``Access-Control-Request-Headers`` (a browser sends them
    lowercased and sorted, Fetch §4.8 step 4), at most :data:`MAX_PARAM_HEADERS`; others are
    left out, so the browser refuses a request that would send them."""
    names: list[str] = []
    for line in lines:
        for raw in line.split(","):
            name = raw.strip().lower()
            if _PARAM_HEADER.fullmatch(name) and name not in names:
                names.append(name)
                if len(names) == MAX_PARAM_HEADERS:
                    return names
    return names
