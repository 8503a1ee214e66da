"""Pipeline step 1, routing: the exact MCP path and the RFC 9728 §3 metadata paths; nothing else.

- The MCP path (the path of the configured ``resource``) takes every method; the endpoint
  answers anything but POST with 405 ``Allow: POST`` before authentication (with
  ``cors.enabled``, a trusted origin's CORS preflight with 204: :mod:`gateway.http.pipeline.cors`).
- Protected Resource Metadata (RFC 9728 §3.1) is served unauthenticated, by GET and HEAD, at
  ``/.well-known/oauth-protected-resource<mcp path>`` and at the root well-known path (MCP
  2025-11-25 authorization.mdx §Protected Resource Metadata Discovery: clients fall back to the
  root). Any ``MCP-Protocol-Version`` header is ignored there (Codex sends ``2024-11-05``).
  With ``cors.enabled`` they answer a trusted origin's ``OPTIONS`` preflight too.
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

from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import HttpVersion11, hdrs, web

from gateway.config import Config
from gateway.errors import OriginForbidden
from gateway.http.error_response import render_error
from gateway.http.pipeline.cors import Cors
from gateway.http.pipeline.endpoint import McpEndpoint
from gateway.jsonkit.write import compact_ascii

__all__ = ["JWKS_PATH", "PRM_ROOT_PATH", "add_jwks_route", "add_mcp_routes", "ops_jwks"]

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
    # Browser-based clients fetch it cross-origin (RFC 9728 §3 places no restriction); with
    # cors.enabled only the trusted origins are named instead (gateway/http/pipeline/cors.py).
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
        body = compact_ascii(jwks_document())
        return web.Response(status=200, body=body, headers=JWKS_HEADERS)

    app.router.add_get(JWKS_PATH, jwks)  # allow_head: HEAD too


def ops_jwks(
    assertion_keys: Callable[[], dict[str, Any]] | None, checkpoint: dict[str, Any] | None
) -> Callable[[], dict[str, Any]] | None:
    """An ops listener's JWK Set: the caller-assertion keys and the audit checkpoint key
    (``audit verify --jwks`` takes the document as it is). The single-process ops listener and
    a ``--workers`` group's both publish this one document."""
    if checkpoint is None:
        return assertion_keys
    if assertion_keys is None:
        return lambda: {"keys": [checkpoint]}
    return lambda: {"keys": [*assertion_keys()["keys"], checkpoint]}


def add_mcp_routes(
    app: web.Application,
    endpoint: McpEndpoint,
    *,
    config: Config,
    prm_document: Callable[[], dict[str, Any]] | None,
    jwks_document: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """Register the MCP path, when ``prm_document`` is given both PRM paths, and when
    ``jwks_document`` is given the JWK Set; with ``cors.enabled`` the CORS headers of every
    answer and the metadata paths' preflight (:mod:`gateway.http.pipeline.cors`)."""
    app.router.add_route(
        "*", config.mcp_path, endpoint.handle, expect_handler=_expect_continue_only
    )
    cors = Cors(config) if config.cors.enabled else None
    if cors is not None:
        app.on_response_prepare.append(cors.on_response_prepare)
    if jwks_document is not None:
        add_jwks_route(app, jwks_document)
    if prm_document is None:
        return

    async def protected_resource_metadata(request: web.Request) -> web.Response:
        body = compact_ascii(prm_document())
        return web.Response(status=200, body=body, headers=PRM_HEADERS)

    for path in dict.fromkeys((config.prm_path, PRM_ROOT_PATH)):
        app.router.add_get(path, protected_resource_metadata)  # allow_head: HEAD too
        if cors is not None:
            app.router.add_route("OPTIONS", path, _metadata_preflight(cors))


def _metadata_preflight(cors: Cors) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def preflight(request: web.Request) -> web.Response:
        try:
            return cors.metadata_preflight(request)
        except OriginForbidden as err:
            return render_error(err, challenge=None)

    return preflight
