"""Pipeline step 1, routing: the exact MCP path and the RFC 9728 §3 metadata paths; nothing else.

- The MCP path (the path of the configured ``resource``) takes every method; the endpoint
  answers anything but POST with 405 ``Allow: POST`` before authentication.
- Protected Resource Metadata (RFC 9728 §3.1) is served unauthenticated, by GET and HEAD, at
  ``/.well-known/oauth-protected-resource<mcp path>`` and at the root well-known path (MCP
  2025-11-25 authorization.mdx §Protected Resource Metadata Discovery: clients fall back to the
  root). Any ``MCP-Protocol-Version`` header is ignored there (Codex sends ``2024-11-05``).
- With ``identity_jwks.public: true``, the gateway's JWK Set of caller-assertion keys at
  ``/.well-known/jwks.json`` (GET and HEAD, unauthenticated: public keys only). The ops listener
  always serves it when any key is configured (:func:`add_jwks_route`).
- Every other path is aiohttp's 404.

``Expect`` (RFC 9110 §10.1.1) on the MCP path: ``100-continue`` gets aiohttp's interim 100 as
usual; any other expectation is ignored (the RFC's MAY-417 is optional) and the request goes
through the pipeline like any other. aiohttp's default handler answered those itself, before the
pipeline: a plain-text 417 quoting the header, without ``Cache-Control: no-store``,
``X-Request-Id`` or an access line (issue 12: no answer outside the status table).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from aiohttp import HttpVersion11, hdrs, web

from gateway.config import Config
from gateway.http.endpoint import McpEndpoint

__all__ = ["JWKS_PATH", "PRM_ROOT_PATH", "add_jwks_route", "add_mcp_routes"]

JWKS_PATH: Final = "/.well-known/jwks.json"
JWKS_HEADERS: Final = {
    "Content-Type": "application/jwk-set+json",  # RFC 7517 §8.5
    # Verifiers cache it; a rotation publishes the next key at least this long ahead
    # (docs/backends.md#rotating-the-assertion-key).
    "Cache-Control": "public, max-age=300",
}

PRM_ROOT_PATH: Final = "/.well-known/oauth-protected-resource"
PRM_HEADERS: Final = {
    "Content-Type": "application/json",
    # Public, non-secret, and stable between deploys: short shared caching is safe.
    "Cache-Control": "public, max-age=300",
    # Browser-based clients fetch it cross-origin (RFC 9728 §3 places no restriction).
    "Access-Control-Allow-Origin": "*",
}


async def _expect_continue_only(request: web.Request) -> None:
    """The MCP route's ``Expect`` handler: 100 Continue for ``100-continue``, else nothing."""
    # As aiohttp's default handler does for 100-continue (HTTP/1.1 only, RFC 9110 §10.1.1).
    expect = request.headers.get(hdrs.EXPECT, "")
    if request.version == HttpVersion11 and expect.strip().lower() == "100-continue":
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # the response proper has not started


def add_jwks_route(app: web.Application, jwks_document: Callable[[], dict[str, Any]]) -> None:
    """Serve the caller-assertion JWK Set (RFC 7517 §5) at :data:`JWKS_PATH`."""

    async def jwks(request: web.Request) -> web.Response:
        body = json.dumps(jwks_document(), separators=(",", ":")).encode()
        return web.Response(status=200, body=body, headers=JWKS_HEADERS)

    app.router.add_get(JWKS_PATH, jwks)  # allow_head: HEAD too


def add_mcp_routes(
    app: web.Application,
    endpoint: McpEndpoint,
    *,
    config: Config,
    prm_document: Callable[[], dict[str, Any]] | None,
    jwks_document: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """Register the MCP path, when ``prm_document`` is given both PRM paths, and when
    ``jwks_document`` is given the JWK Set."""
    app.router.add_route(
        "*", config.mcp_path, endpoint.handle, expect_handler=_expect_continue_only
    )
    if jwks_document is not None:
        add_jwks_route(app, jwks_document)
    if prm_document is None:
        return

    async def protected_resource_metadata(request: web.Request) -> web.Response:
        body = json.dumps(prm_document(), separators=(",", ":")).encode()
        return web.Response(status=200, body=body, headers=PRM_HEADERS)

    for path in dict.fromkeys((config.prm_path, PRM_ROOT_PATH)):
        app.router.add_get(path, protected_resource_metadata)  # allow_head: HEAD too
