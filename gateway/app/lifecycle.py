"""Both listeners' lifecycle: :class:`GatewayServer` (start, graceful stop) and :func:`serve`.

Shutdown is graceful (:meth:`GatewayServer.stop`): readiness goes false first and every answer
from then on closes its connection (``Connection: close``: a reverse proxy moves off its pooled
connections instead of having them closed under a request it is writing); the public listener
keeps serving for ``limits.shutdown_delay_s`` (load balancers and Kubernetes endpoint
controllers stop routing new requests only after they see /readyz fail or the pod terminate;
requests they still send in that window are served; a second SIGTERM/SIGINT ends the delay at
once); then it stops accepting (no new connection can start, those whose handshake began are
accepted and served, none is reset: :mod:`gateway.app.syn_filter`; idle kept-alive ones close),
in-flight requests get ``limits.drain_timeout_s`` to be answered
(a body still arriving is answered ``503 draining`` just before the deadline, a running tool call
the timeout tool error; what is left is then cancelled), background tasks stop, outbound client
sessions are closed, and the ops listener goes last so probes see "draining" until the end. The
whole stop takes at most ``shutdown_delay_s`` plus ``drain_timeout_s`` plus :data:`CANCEL_GRACE_S`
and the cleanups.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from aiohttp import web

import gateway
from gateway.app.connection_limits import ListenerLimits
from gateway.app.event_loop import loop_name
from gateway.app.listener import MAX_HEADER_FIELD_BYTES
from gateway.app.ops import build_ops_app
from gateway.app.public import build_public_app
from gateway.app.server import GuardedServer, ListenerRunner
from gateway.app.services import Readiness, ReadinessCheck, Services
from gateway.app.syn_filter import HANDSHAKE_GRACE_S
from gateway.config import Config, Listen
from gateway.observability.lines import stdout_writer
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics

__all__ = [
    "CANCEL_GRACE_S",
    "MAX_HEADER_FIELD_BYTES",
    "GatewayServer",
    "OpsAppFactory",
    "bind_tcp",
    "bind_unix",
    "serve",
]

GC_THRESHOLDS: Final = (50_000, 20, 10)
"""Cyclic-collector thresholds once serving. The default first threshold (700 net container
allocations) is crossed by every burst of concurrent requests: each collection then walks
the live objects of every request in flight, promotes them, and the older generations follow
(about a tenth of the CPU per call at 64 connections, docs/performance.md). The request path
makes almost no cyclic garbage, so collections are rare at 50,000 and memory stays flat."""

log = get_logger("gateway.app")

ANSWER_MARGIN_S: Final = 0.25
"""Requests in flight are answered this long before the drain deadline (the answer must still be
written before the listener closes)."""
CANCEL_GRACE_S: Final = 0.5
"""After the drain deadline, how long cancelled handlers get to unwind before the stop goes on."""

READY_POLL_S: Final = 0.02
"""How often a gateway waiting to bind its public listener looks at its readiness checks."""
PUBLIC_READY_WAIT_S: Final = 10.0
"""A gateway binds its public listener once it is ready (issuer metadata, first catalog), at the
latest this long after its start; then it answers what it can (503 ``issuer_unavailable``
while the issuer is unknown) rather than refusing connections. Until then a proxy's connection
is refused and goes to another replica."""

OpsAppFactory = Callable[[Config, Services], web.Application]


class GatewayServer:
    """Both listeners plus startup and graceful shutdown. Not reusable after :meth:`stop`."""

    def __init__(
        self,
        config: Config,
        services: Services | None = None,
        *,
        ops_socket: str | None = None,
        ops_app: OpsAppFactory = build_ops_app,
        reuse_port: bool = False,
        public_when_ready_s: float | None = None,
        log_fields: Mapping[str, Any] | None = None,
    ) -> None:
        """The keyword options are for the workers of ``serve --workers N``
        (:mod:`gateway.workers`): the ops app on a private Unix socket instead of
        ``ops_listen``, the public listener shared with ``SO_REUSEPORT`` and bound only once
        the readiness checks pass (at most ``public_when_ready_s`` later: a restarted worker
        takes no connection it would answer 503 while its siblings are ready), and the worker
        named in the lifecycle log lines."""
        self.config = config
        self.services = services if services is not None else Services()
        self._ops_socket = ops_socket
        self._ops_app = ops_app
        self._reuse_port = reuse_port
        self._public_when_ready_s = public_when_ready_s
        self.log_fields = dict(log_fields or {})
        self._public_runner: web.AppRunner | None = None
        self._ops_runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._hurry = asyncio.Event()
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
        the background tasks (with ``public_when_ready_s``: start them first and bind the
        public listener once the readiness checks pass). Raises :class:`OSError` when a
        listener cannot bind."""
        limits = ListenerLimits.from_config(self.config)
        metrics = self.services.metrics
        ops_app = self._ops_app(self.config, self.services)
        try:
            if self._ops_socket is not None:
                self._ops_runner = await bind_unix(ops_app, self._ops_socket, limits, metrics)
            else:
                self._ops_runner, self.ops_port = await bind_tcp(
                    ops_app, self.config.ops_listen, limits, metrics
                )
            if self._public_when_ready_s is not None:
                self._start_background()
                await self._checks_pass(self._public_when_ready_s)
            self._public_runner, self.public_port = await bind_tcp(
                build_public_app(self.config, self.services),
                self.config.listen,
                limits,
                metrics,
                reuse_port=self._reuse_port,
            )
        except BaseException:
            await self._cancel_tasks()
            await self._close_runners()
            await self._release_services()
            raise
        # No await since the bind: these run before the loop can read a first request.
        for hook in self.services.after_bind:
            hook()
        if not self._tasks:
            self._start_background()
        self.readiness.started = True
        log.info(
            "gateway.started",
            # The listeners speak plain HTTP (TLS ends at the reverse proxy): say so.
            mcp_url=f"http://{_host(self.config.listen.host)}:{self.public_port}"
            f"{self.config.mcp_path}",
            ops=self._ops_socket or f"{self.config.ops_listen.host}:{self.ops_port}",
            resource=self.config.resource,
            version=gateway.__version__,
            event_loop=loop_name(),
            **self.log_fields,
        )

    def _start_background(self) -> None:
        for factory in self.services.background:
            self._tasks.append(asyncio.create_task(_guarded(factory)))

    async def _checks_pass(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        # The checks are plain callables (no event to wait on): poll them.
        while not self.readiness.checks_pass() and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(READY_POLL_S)

    async def _cancel_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def hurry(self) -> None:
        """End the shutdown delay now (a second signal during :meth:`stop`)."""
        self._hurry.set()

    async def stop(self) -> None:
        """Graceful stop within ``shutdown_delay_s + drain_timeout_s`` (+ :data:`CANCEL_GRACE_S`).

        Not ready, keep serving for the shutdown delay, stop accepting, close idle connections,
        tell the drain hooks by when every request must be answered (a body still arriving is
        then ``503 draining``, a tool call still running the timeout tool error), wait for the
        requests in flight until then, cancel what is left, stop tasks, close sessions; the ops
        listener goes last.
        """
        started = time.monotonic()
        limits = self.config.limits
        drain_s = limits.drain_timeout_s
        self.readiness.draining = True
        log.info(
            "gateway.draining",
            drain_timeout_s=drain_s,
            shutdown_delay_s=limits.shutdown_delay_s,
            **self.log_fields,
        )
        runner = self._public_runner
        if runner is not None and isinstance(runner.server, GuardedServer):
            # From now on every answer says Connection: close, so a reverse proxy moves off
            # its kept-alive connections during the delay instead of having them closed under
            # a request it is writing (a 502: proxies do not retry a POST).
            runner.server.close_keepalive()
        if limits.shutdown_delay_s > 0 and runner is not None:
            # Still serving, new connections included, while /readyz already says 503.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(limits.shutdown_delay_s):
                    await self._hurry.wait()
            log.info(
                "gateway.stop_accepting",
                delayed_ms=round((time.monotonic() - started) * 1000),
                **self.log_fields,
            )
        deadline = time.monotonic() + drain_s  # the drain starts when accepting stops
        if runner is not None:
            server = runner.server
            refused = []
            if isinstance(server, GuardedServer):
                refused = [server.refuse_new(site) for site in runner.sites]
            if refused and all(refused):
                # No new handshake starts; the ones under way complete and are served.
                await asyncio.sleep(HANDSHAKE_GRACE_S)
            for site in list(runner.sites):
                if isinstance(server, GuardedServer):
                    server.take_pending(site)  # queued connections are served, not reset
                await site.stop()  # no new connections (no await in between)
            if server is not None:
                server.pre_shutdown()  # idle keep-alive connections close now, busy ones after
            answer_by = deadline - min(ANSWER_MARGIN_S, drain_s / 4)
            for hook in self.services.drain:
                try:
                    hook(answer_by)
                except Exception:
                    log.exception("gateway.drain_hook_failed")
            if isinstance(server, GuardedServer):
                await server.settle()
                await server.wait_idle(deadline - time.monotonic())
            # What is still running now is cancelled (within CANCEL_GRACE_S).
            await runner.cleanup()
            self._public_runner = None
        await self._cancel_tasks()
        await self._release_services()
        await self._close_runners()
        log.info(
            "gateway.stopped",
            duration_ms=round((time.monotonic() - started) * 1000, 2),
            **self.log_fields,
        )

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


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host  # RFC 3986 §3.2.2: IPv6 literals in brackets


def _runner(app: web.Application, limits: ListenerLimits, metrics: Metrics | None) -> web.AppRunner:
    return ListenerRunner(
        app,
        limits=limits,
        metrics=metrics,
        # Cancel a handler whose client went away instead of finishing work nobody reads.
        handler_cancellation=True,
        # GatewayServer.stop waits for the requests in flight itself (drain_timeout_s); the
        # runner's own wait is only the grace for cancelled handlers to unwind.
        shutdown_timeout=CANCEL_GRACE_S,
    )


async def bind_tcp(
    app: web.Application,
    listen: Listen,
    limits: ListenerLimits,
    metrics: Metrics | None,
    *,
    reuse_port: bool = False,
) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``listen`` behind the listener's connection bounds; (runner, port).
    ``reuse_port``: share the port with sibling processes (``SO_REUSEPORT``)."""
    runner = _runner(app, limits, metrics)
    await runner.setup()
    try:
        site = web.TCPSite(runner, listen.host, listen.port, reuse_port=reuse_port or None)
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


async def bind_unix(
    app: web.Application, path: str, limits: ListenerLimits, metrics: Metrics | None
) -> web.AppRunner:
    """Serve ``app`` on the Unix socket ``path`` (a worker's private ops listener)."""
    runner = _runner(app, limits, metrics)
    await runner.setup()
    try:
        await web.UnixSite(runner, path).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


async def _guarded(factory: Callable[[], Awaitable[None]]) -> None:
    try:
        await factory()
    except asyncio.CancelledError:
        raise
    except Exception:
        # A failed startup dependency keeps its readiness check false; the process stays alive
        # so /healthz and /metrics remain available for diagnosis.
        log.exception("gateway.background_task_failed")


async def serve(
    config: Config, services: Services | None = None, *, server: GatewayServer | None = None
) -> None:
    """Run until SIGTERM or SIGINT, then stop gracefully; a second signal ends the shutdown
    delay early (the drain still runs). ``server``: one built with worker options."""
    if server is None:
        # The public listener waits for readiness (bounded): behind a proxy without health
        # checks, a replica bound before its first catalog would answer a call "unknown tool".
        server = GatewayServer(config, services, public_when_ready_s=PUBLIC_READY_WAIT_S)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    received: list[str] = []

    def _on_signal(sig: signal.Signals) -> None:
        received.append(sig.name)
        if stop.is_set():
            server.hurry()  # a second signal: skip what is left of the shutdown delay
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
        gc.set_threshold(*GC_THRESHOLDS)
        try:
            await stop.wait()
            log.info(
                "gateway.signal", signal=received[0] if received else None, **server.log_fields
            )
        finally:
            await server.stop()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        # The last lines of the drain (access lines, audit events, gateway.stopped) are out
        # before the loop goes away; the atexit hook is the second net.
        stdout_writer().flush_now()
