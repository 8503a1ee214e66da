"""Assembles the gateway: the public MCP listener, the ops listener and their lifecycle.

Two aiohttp applications, each on its own :class:`aiohttp.web.AppRunner`:

* the **public** listener (``config.listen``) serves the exact MCP path (and, once wired, the
  RFC 9728 protected-resource metadata paths); everything else is 404;
* the **ops** listener (``config.ops_listen``, loopback by default) serves ``/healthz``,
  ``/readyz`` and ``/metrics`` and is never exposed through the reverse proxy.

Shutdown is graceful (:meth:`GatewayServer.stop`): readiness goes false first, the public
listener stops accepting, in-flight requests get ``limits.drain_timeout_s`` to finish (then they
are cancelled), background tasks stop, outbound client sessions are closed, and the ops listener
goes last so probes see "draining" until the end.

Only this module wires concrete classes to the Protocols of :mod:`gateway.seams`; it is filled
in through :class:`Services`.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import itertools
import os
import re
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Literal

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

import gateway
from gateway.config import Config, Listen
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics, metrics_response_body
from gateway.outbound import Outbound
from gateway.seams import Authenticator, Backend, Observer, PolicySource, RateLimiter

__all__ = [
    "CONFIG",
    "REQUEST_ID",
    "REQUEST_ID_HEADER",
    "SERVICES",
    "GatewayServer",
    "Readiness",
    "ReadinessCheck",
    "Services",
    "request_id_middleware",
    "serve",
]

log = get_logger("gateway.app")

ReadinessCheck = Callable[[], bool]
"""A cheap, synchronous probe of one startup dependency: True once it is usable."""

REQUEST_ID_HEADER: Final = "X-Request-Id"
_REQUEST_ID_RE: Final = re.compile(r"[A-Za-z0-9._-]{1,128}")
"""Accepted inbound request ids: short and token-safe (no log or header injection)."""

REQUEST_ID: Final = web.RequestKey("request_id", str)
"""The request id of the current request (also bound as ``request_id`` in structlog contextvars)."""
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
    """What the gateway runs with; ``app.py``'s wiring fills it, tests may fill it partially.

    Fields left ``None`` are not wired yet. ``background`` coroutines start once both listeners
    are bound (startup dependencies such as issuer discovery or the first catalog fetch, policy
    reload watchers) and are cancelled at stop; ``cleanups`` run after the drain, before outbound
    sessions are closed.
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
    background: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    cleanups: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def add_readiness_check(self, name: str, check: ReadinessCheck) -> None:
        self.readiness.add(name, check)


SERVICES: Final = web.AppKey("services", Services)


# --- request id -------------------------------------------------------------------------------


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


def _new_request_id() -> str:
    """A per-process random prefix plus a counter: unique across replicas without a syscall."""
    return f"{_RID_PREFIX}{next(_rid_counter):020x}"  # 32 hex digits, like a uuid4 hex


def request_id_middleware(
    *,
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...],
    access_level: Literal["debug", "info"] = "debug",
) -> Middleware:
    """Take ``X-Request-Id`` from a trusted proxy (if short and token-safe), else make one.

    The id is stored under :data:`REQUEST_ID`, bound as ``request_id`` for every log line of the
    request, and echoed in the response's ``X-Request-Id`` (see :func:`_echo_request_id`).
    """

    @web.middleware
    async def request_id(request: web.Request, handler: Handler) -> web.StreamResponse:
        offered = request.headers.get(REQUEST_ID_HEADER, "")
        if (
            offered
            and _peer_is_trusted(request, trusted_proxies)
            and (_REQUEST_ID_RE.fullmatch(offered))
        ):
            rid = offered
        else:
            rid = _new_request_id()
        request[REQUEST_ID] = rid
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

MAX_HEADER_FIELD_BYTES: Final = 16_384
"""Largest request line / header field the listeners accept (aiohttp's default is 8190)."""


async def _echo_request_id(request: web.Request, response: web.StreamResponse) -> None:
    # on_response_prepare also runs for streamed (SSE) and exception responses, before headers go.
    rid = request.get(REQUEST_ID)
    if rid is not None:
        response.headers[REQUEST_ID_HEADER] = rid


# --- ops listener ---------------------------------------------------------------------------


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
    body = {"status": state, "checks": checks, "policy_version": policy_version}
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


def build_ops_app(config: Config, services: Services) -> web.Application:
    app = web.Application(
        middlewares=[request_id_middleware(trusted_proxies=config.trusted_proxies)]
    )
    app[CONFIG] = config
    app[SERVICES] = services
    app.on_response_prepare.append(_echo_request_id)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    return app


# --- public listener ------------------------------------------------------------------------


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
    app = web.Application(
        middlewares=[
            request_id_middleware(
                trusted_proxies=config.trusted_proxies,
                # With an observer wired, its mcp.request line is the access log; this generic
                # line would duplicate it on the hot path.
                access_level="debug" if services.observer is not None else "info",
            )
        ]
    )
    app[CONFIG] = config
    app[SERVICES] = services
    app.on_response_prepare.append(_echo_request_id)
    _install_mcp_routes(app, services)
    return app


# --- lifecycle ------------------------------------------------------------------------------


class GatewayServer:
    """Both listeners plus startup and graceful shutdown. Not reusable after :meth:`stop`."""

    def __init__(self, config: Config, services: Services | None = None) -> None:
        self.config = config
        self.services = services if services is not None else Services()
        self._public_runner: web.AppRunner | None = None
        self._ops_runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.public_port = 0
        self.ops_port = 0

    @property
    def readiness(self) -> Readiness:
        return self.services.readiness

    def add_readiness_check(self, name: str, check: ReadinessCheck) -> None:
        self.services.add_readiness_check(name, check)

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.public_port}{self.config.mcp_path}"

    @property
    def ops_url(self) -> str:
        return f"http://127.0.0.1:{self.ops_port}"

    async def start(self) -> None:
        """Bind the ops listener, then the public one (port 0 picks a free port), then start
        the background tasks. Raises :class:`OSError` when a listener cannot bind."""
        drain = self.config.limits.drain_timeout_s
        try:
            self._ops_runner, self.ops_port = await _bind(
                build_ops_app(self.config, self.services), self.config.ops_listen, 1.0
            )
            self._public_runner, self.public_port = await _bind(
                build_public_app(self.config, self.services), self.config.listen, drain
            )
        except BaseException:
            await self._close_runners()
            await self._release_services()
            raise
        for factory in self.services.background:
            self._tasks.append(asyncio.create_task(_guarded(factory)))
        self.readiness.started = True
        log.info(
            "gateway.started",
            mcp_url=f"{self.config.listen.host}:{self.public_port}{self.config.mcp_path}",
            ops=f"{self.config.ops_listen.host}:{self.ops_port}",
            resource=self.config.resource,
            version=gateway.__version__,
        )

    async def stop(self) -> None:
        """Graceful stop: not ready, stop accepting, drain, stop tasks, close sessions."""
        started = time.monotonic()
        self.readiness.draining = True
        log.info("gateway.draining", drain_timeout_s=self.config.limits.drain_timeout_s)
        if self._public_runner is not None:
            # AppRunner.cleanup stops the site (no new connections), closes idle keep-alive
            # connections, waits up to shutdown_timeout for in-flight handlers, then cancels.
            await self._public_runner.cleanup()
            self._public_runner = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self._release_services()
        await self._close_runners()
        log.info("gateway.stopped", duration_ms=round((time.monotonic() - started) * 1000, 2))

    async def _release_services(self) -> None:
        """Run the cleanups, then close the outbound client sessions (they use them last)."""
        for cleanup in self.services.cleanups:
            try:
                await cleanup()
            except Exception:
                log.exception("gateway.cleanup_failed")
        if self.services.outbound is not None:
            await self.services.outbound.close()

    async def _close_runners(self) -> None:
        for runner in (self._public_runner, self._ops_runner):
            if runner is not None:
                await runner.cleanup()
        self._public_runner = self._ops_runner = None


async def _bind(app: web.Application, listen: Listen, drain_s: float) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(
        app,
        # Cancel a handler whose client went away instead of finishing work nobody reads.
        handler_cancellation=True,
        shutdown_timeout=drain_s,
        access_log=None,  # request_id_middleware logs one structured line per request
        # Header lines up to 16 KiB: an 8 KiB bearer token (auth/bearer.py's cap) plus the
        # "Authorization: Bearer " prefix must reach the gateway's own 401, not aiohttp's 400.
        max_field_size=MAX_HEADER_FIELD_BYTES,
        max_line_size=MAX_HEADER_FIELD_BYTES,
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, listen.host, listen.port)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    port = 0
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            port = int(address[1])
            break
    return runner, port


async def _guarded(factory: Callable[[], Awaitable[None]]) -> None:
    try:
        await factory()
    except asyncio.CancelledError:
        raise
    except Exception:
        # A failed startup dependency keeps its readiness check false; the process stays alive
        # so /healthz and /metrics remain available for diagnosis.
        log.exception("gateway.background_task_failed")


async def serve(config: Config, services: Services | None = None) -> None:
    """Run until SIGTERM or SIGINT, then stop gracefully. A second signal is not intercepted."""
    server = GatewayServer(config, services)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []

    def _on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        stop.set()

    handled = (signal.SIGTERM, signal.SIGINT)
    # Installed before binding, so a signal during startup still means "stop gracefully".
    for sig in handled:
        loop.add_signal_handler(sig, _on_signal, sig)
    try:
        await server.start()
        # Everything built at startup (config, policy, catalog, sessions) lives until exit:
        # move it out of the collector's view so young-generation collections on the request
        # path stay cheap.
        gc.freeze()
        try:
            await stop.wait()
            log.info("gateway.signal", signal=received[0] if received else None)
        finally:
            await server.stop()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
