"""The ops listener (``config.ops_listen``, loopback by default): ``/healthz``, ``/readyz``,
``/metrics``, with caller-assertion keys or an audit checkpoint key ``/.well-known/jwks.json``,
and, with ``admin.token``,
``POST /admin/revoke`` and, with a ``user_oauth`` backend, ``POST /admin/upstream-tokens/*``.
Never exposed through the reverse proxy."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.app.admin import add_admin_routes
from gateway.app.admin_upstream import add_upstream_admin_routes
from gateway.app.request_id import echo_request_id, request_id_middleware
from gateway.app.services import CONFIG, SERVICES, Services
from gateway.config import Config
from gateway.http.pipeline.routes import add_jwks_route
from gateway.observability.logging import get_logger
from gateway.observability.metrics import metrics_response_body

__all__ = ["build_ops_app"]

log = get_logger("gateway.app")


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "alive"}, headers={"Cache-Control": "no-store"})


async def _readyz(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    state, checks = services.readiness.evaluate()
    policy_version: str | None = None
    if services.policy is not None:
        try:
            policy_version = services.policy.current().version
        except Exception:  # a policy source that cannot answer is reported, not trusted
            log.exception("readiness.policy_version_failed")
    body: dict[str, Any] = {"status": state, "checks": checks, "policy_version": policy_version}
    if services.backend_report is not None:
        try:
            body["backends"] = services.backend_report()
        except Exception:  # informational: a broken report never turns readiness around
            log.exception("readiness.backend_report_failed")
    if services.issuer_report is not None:
        try:
            body["issuers"] = services.issuer_report()
        except Exception:  # informational, like the backend report
            log.exception("readiness.issuer_report_failed")
    if services.state_report is not None:
        body["state"] = services.state_report()
    return web.json_response(
        body, status=200 if state == "ready" else 503, headers={"Cache-Control": "no-store"}
    )


async def _metrics(request: web.Request) -> web.Response:
    # Negotiated like Prometheus expects (OpenMetrics when asked for); the content type carries
    # parameters (version, charset), so it goes in as a raw header.
    payload, content_type = metrics_response_body(
        request.app[SERVICES].metrics, request.headers.get("Accept")
    )
    return web.Response(
        body=payload, headers={"Content-Type": content_type, "Cache-Control": "no-store"}
    )


def build_ops_app(config: Config, services: Services, *, admin: bool = True) -> web.Application:
    """``admin=False``: without the admin API (a worker's private ops listener; the
    supervisor of ``serve --workers N`` serves the admin API for the group)."""
    app = web.Application(
        middlewares=[request_id_middleware(trusted_proxies=config.trusted_proxies)]
    )
    app[CONFIG] = config
    app[SERVICES] = services
    app.on_response_prepare.append(echo_request_id)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    if services.jwks is not None:
        add_jwks_route(app, services.jwks)
    if admin and services.revoke is not None:
        add_admin_routes(app, config, services.revoke, services.audit)
    if admin and services.upstream_tokens is not None:
        add_upstream_admin_routes(app, config, services.upstream_tokens)
    return app
