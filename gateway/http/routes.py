"""Pipeline step 1, routing: the exact MCP path and the RFC 9728 §3 metadata paths; nothing else.

- The MCP path (the path of the configured ``resource``) takes every method; the endpoint
  answers anything but POST with 405 ``Allow: POST`` before authentication.
- Protected Resource Metadata (RFC 9728 §3.1) is served unauthenticated, by GET and HEAD, at
  ``/.well-known/oauth-protected-resource<mcp path>`` and at the root well-known path (MCP
  2025-11-25 authorization.mdx §Protected Resource Metadata Discovery: clients fall back to the
  root). Any ``MCP-Protocol-Version`` header is ignored there (Codex sends ``2024-11-05``).
- Every other path is aiohttp's 404.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from aiohttp import web

from gateway.config import Config
from gateway.http.endpoint import McpEndpoint

__all__ = ["PRM_ROOT_PATH", "add_mcp_routes"]

PRM_ROOT_PATH: Final = "/.well-known/oauth-protected-resource"
PRM_HEADERS: Final = {
    "Content-Type": "application/json",
    # Public, non-secret, and stable between deploys: short shared caching is safe.
    "Cache-Control": "public, max-age=300",
    # Browser-based clients fetch it cross-origin (RFC 9728 §3 places no restriction).
    "Access-Control-Allow-Origin": "*",
}


def add_mcp_routes(
    app: web.Application,
    endpoint: McpEndpoint,
    *,
    config: Config,
    prm_document: Callable[[], dict[str, Any]] | None,
) -> None:
    """Register the MCP path and, when ``prm_document`` is given, both PRM paths."""
    app.router.add_route("*", config.mcp_path, endpoint.handle)
    if prm_document is None:
        return

    async def protected_resource_metadata(request: web.Request) -> web.Response:
        body = json.dumps(prm_document(), separators=(",", ":")).encode()
        return web.Response(status=200, body=body, headers=PRM_HEADERS)

    for path in dict.fromkeys((config.prm_path, PRM_ROOT_PATH)):
        app.router.add_get(path, protected_resource_metadata)  # allow_head: HEAD too
