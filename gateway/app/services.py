"""What the gateway runs with (:class:`Services`) and the readiness registry behind ``/readyz``.

:mod:`gateway.wiring` fills :class:`Services` from a :class:`~gateway.config.Config`; tests may
fill it partially. Both listeners find it (and the config) under the application keys here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web
from aiohttp.typedefs import Handler

import gateway
from gateway.config import Config
from gateway.observability.audit import AuditSink
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Outbound
from gateway.seams import (
    Authenticator,
    Backend,
    LoginPages,
    Observer,
    PolicySource,
    RateLimiter,
    UpstreamTokenAdmin,
)

__all__ = ["CONFIG", "SERVICES", "Readiness", "ReadinessCheck", "Services"]

log = get_logger("gateway.app")

ReadinessCheck = Callable[[], bool]
"""A cheap, synchronous probe of one startup dependency: True once it is usable."""

CONFIG: Final = web.AppKey("config", Config)


class Readiness:
    """The readiness-check registry behind ``/readyz``.

    Not ready while starting, while any registered check is false (or raises: fail closed),
    and from the moment a graceful stop begins.
    """

    __slots__ = ("_checks", "draining", "started")

    def __init__(self) -> None:
        self._checks: dict[str, ReadinessCheck] = {}
        self.started = False
        self.draining = False

    def add(self, name: str, check: ReadinessCheck) -> None:
        """Register ``check`` under ``name``; a second registration of a name replaces it."""
        self._checks[name] = check

    def checks_pass(self) -> bool:
        """Every registered check is true now (whatever the lifecycle state)."""
        try:
            return all(bool(check()) for check in self._checks.values())
        except Exception:  # a broken probe means "not ready"
            return False

    def evaluate(self) -> tuple[str, dict[str, bool]]:
        results: dict[str, bool] = {}
        for name, check in self._checks.items():
            try:
                results[name] = bool(check())
            except Exception:  # a broken probe means "not ready", never "ready"
                log.exception("readiness.check_failed", check=name)
                results[name] = False
        if self.draining:
            return "draining", results
        if not self.started:
            return "starting", results
        return ("ready" if all(results.values()) else "not_ready"), results


@dataclass(slots=True)
class Services:
    """What the gateway runs with; :mod:`gateway.wiring` fills it, tests may fill it partially.

    Fields left ``None`` are not wired yet. ``background`` coroutines start once both listeners
    are bound (startup dependencies such as issuer discovery or the first catalog fetch, policy
    reload watchers) and are cancelled at stop; ``cleanups`` run after the drain, before outbound
    sessions are closed; ``drain`` hooks hear when the drain starts and when it must end.
    """

    metrics: Metrics = field(default_factory=lambda: Metrics(gateway.__version__))
    authenticator: Authenticator | None = None
    policy: PolicySource | None = None
    backend: Backend | None = None
    limiter: RateLimiter | None = None
    observer: Observer | None = None
    outbound: Outbound | None = None
    mcp_handler: Handler | None = None
    """The handler for every method on the MCP path (pipeline steps 2-18, ``gateway.http``)."""
    install_routes: Callable[[web.Application], None] | None = None
    """Installs the MCP path and the RFC 9728 metadata paths (``gateway.wiring``); takes
    precedence over ``mcp_handler``."""
    readiness: Readiness = field(default_factory=Readiness)
    state_report: Callable[[], dict[str, Any]] | None = None
    """The ``state`` member of ``/readyz``: where shared state lives and whether it answers
    (informational; a Redis outage follows ``state.on_store_error``, it does not fail readiness:
    only a starting replica waits for Redis, through the ``state_store`` check)."""
    backend_report: Callable[[], dict[str, Any]] | None = None
    """The ``backends`` member of ``/readyz``: each backend's readiness, era, tools and catalog
    age (the ``backend_catalog`` check itself follows ``backend_readiness``)."""
    issuer_report: Callable[[], list[dict[str, Any]]] | None = None
    """The ``issuers`` member of ``/readyz``: per trusted issuer its url, ``tokens`` mode,
    readiness, key count and why it is not usable (the ``issuer`` check needs all of them)."""
    revoke: Callable[[bytes, float], Awaitable[tuple[float, bool]]] | None = None
    """Revoke a token by revocation key, at least until an instant (``POST /admin/revoke``,
    with ``admin.token``)."""
    adopt_revocation: Callable[[bytes, float], bool] | None = None
    """Apply a revocation decided elsewhere, until a Unix time (a worker of ``serve --workers
    N`` hears the supervisor's revocations this way)."""
    reload_policy: Callable[[], object] | None = None
    """Re-read and validate the policy files now (what SIGHUP does; blocking: run it in an
    executor)."""
    audit: AuditSink | None = None
    login: LoginPages | None = None
    """The browser login surface (``login:``): its pages are installed by ``install_routes``;
    features add their account sections and pending-action pages to it before the start."""
    upstream_tokens: UpstreamTokenAdmin | None = None
    """The stored per-user upstream tokens (``user_oauth`` backends), for the admin API."""
    jwks: Callable[[], dict[str, Any]] | None = None
    """The JWK Set of the caller-assertion keys (``/.well-known/jwks.json`` on the ops
    listener); None when no backend signs assertions and no key is published."""
    background: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    cleanups: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    after_bind: list[Callable[[], None]] = field(default_factory=list)
    """Called synchronously once the public listener is bound, before the event loop runs
    again, so before any request is read (a worker reads the supervisor's revocations here)."""
    drain: list[Callable[[float], None]] = field(default_factory=list)
    """Called once when a graceful stop begins, with the ``time.monotonic()`` instant by which
    every request in flight must have been answered (the MCP endpoint bounds its waits by it)."""

    def add_readiness_check(self, name: str, check: ReadinessCheck) -> None:
        self.readiness.add(name, check)


SERVICES: Final = web.AppKey("services", Services)
