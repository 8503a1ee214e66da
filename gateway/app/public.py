"""The public listener (``config.listen``): the exact MCP path and, once wired, the RFC 9728
protected-resource metadata paths; everything else is 404."""

from __future__ import annotations

from aiohttp import web

from gateway.app.fast_path import MCP_LANE
from gateway.app.request_id import echo_request_id, request_id_middleware
from gateway.app.services import CONFIG, SERVICES, Services
from gateway.config import Config

__all__ = ["build_public_app"]


async def _mcp_not_wired(request: web.Request) -> web.Response:
    # Fail closed: without the pipeline there is no authentication, so nothing is served.
    return web.json_response(
        {"error": "mcp endpoint not wired"}, status=503, headers={"Cache-Control": "no-store"}
    )


def _install_mcp_routes(app: web.Application, services: Services) -> None:
    """Route the exact MCP path (every method: the pipeline answers 405 itself) to the handler.

    Pipeline step 1: only the exact path is routed; aiohttp answers 404 for everything else.
    Until ``services.mcp_handler`` is wired, the path answers 503 ``mcp endpoint not wired``.
    """
    config = app[CONFIG]
    if services.install_routes is not None:
        services.install_routes(app)
        return
    handler = services.mcp_handler or _mcp_not_wired
    app.router.add_route("*", config.mcp_path, handler)


def build_public_app(config: Config, services: Services) -> web.Application:
    observed = services.observer is not None
    # With an observer wired, its mcp.request line is the access log: the middleware's generic
    # line would duplicate it on the hot path, so the MCP path skips the middleware, and with
    # nothing left between it and its handler it may skip aiohttp's routing too (fast_path.py).
    skip_path = config.mcp_path if observed else None
    app = web.Application(
        middlewares=[
            request_id_middleware(
                trusted_proxies=config.trusted_proxies,
                access_level="debug" if observed else "info",
                skip_path=skip_path,
            )
        ]
    )
    app[CONFIG] = config
    app[SERVICES] = services
    app.on_response_prepare.append(echo_request_id)
    _install_mcp_routes(app, services)
    if skip_path is not None:
        app[MCP_LANE] = skip_path
    return app
