"""Both listeners' lifecycle: :class:`GatewayServer` (start, graceful stop) and :func:`serve`.

Shutdown is graceful (:meth:`GatewayServer.stop`): readiness goes false first; the public
listener keeps serving for ``limits.shutdown_delay_s`` (load balancers and Kubernetes endpoint
controllers stop routing new requests only after they see /readyz fail or the pod terminate;
requests they still send in that window are served; a second SIGTERM/SIGINT ends the delay at
once); then it stops accepting, in-flight requests get ``limits.drain_timeout_s`` to be answered
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
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

import gateway
from gateway.app.listener import (
    MAX_HEADER_FIELD_BYTES,
    GuardedServer,
    ListenerLimits,
    ListenerRunner,
)
from gateway.app.ops import build_ops_app
from gateway.app.public import build_public_app
from gateway.app.services import Readiness, ReadinessCheck, Services
from gateway.config import Config, Listen
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics

__all__ = ["CANCEL_GRACE_S", "MAX_HEADER_FIELD_BYTES", "GatewayServer", "serve"]

log = get_logger("gateway.app")

ANSWER_MARGIN_S: Final = 0.25
"""Requests in flight are answered this long before the drain deadline (the answer must still be
written before the listener closes)."""
CANCEL_GRACE_S: Final = 0.5
"""After the drain deadline, how long cancelled handlers get to unwind before the stop goes on."""


class GatewayServer:
    """Both listeners plus startup and graceful shutdown. Not reusable after :meth:`stop`."""

    def __init__(self, config: Config, services: Services | None = None) -> None:
        self.config = config
        self.services = services if services is not None else Services()
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
        the background tasks. Raises :class:`OSError` when a listener cannot bind."""
        limits = ListenerLimits.from_config(self.config)
        metrics = self.services.metrics
        try:
            self._ops_runner, self.ops_port = await _bind(
                build_ops_app(self.config, self.services), self.config.ops_listen, limits, metrics
            )
            self._public_runner, self.public_port = await _bind(
                build_public_app(self.config, self.services), self.config.listen, limits, metrics
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
            # The listeners speak plain HTTP (TLS ends at the reverse proxy): say so.
            mcp_url=f"http://{_host(self.config.listen.host)}:{self.public_port}"
            f"{self.config.mcp_path}",
            ops=f"{self.config.ops_listen.host}:{self.ops_port}",
            resource=self.config.resource,
            version=gateway.__version__,
        )

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
        log.info("gateway.draining", drain_timeout_s=drain_s,
                 shutdown_delay_s=limits.shutdown_delay_s)  # fmt: skip
        runner = self._public_runner
        if limits.shutdown_delay_s > 0 and runner is not None:
            # Still serving, new connections included, while /readyz already says 503.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(limits.shutdown_delay_s):
                    await self._hurry.wait()
            log.info(
                "gateway.stop_accepting", delayed_ms=round((time.monotonic() - started) * 1000)
            )
        deadline = time.monotonic() + drain_s  # the drain starts when accepting stops
        if runner is not None:
            for site in list(runner.sites):
                await site.stop()  # no new connections
            server = runner.server
            if server is not None:
                server.pre_shutdown()  # idle keep-alive connections close now, busy ones after
            answer_by = deadline - min(ANSWER_MARGIN_S, drain_s / 4)
            for hook in self.services.drain:
                try:
                    hook(answer_by)
                except Exception:
                    log.exception("gateway.drain_hook_failed")
            if isinstance(server, GuardedServer):
                await server.wait_idle(deadline - time.monotonic())
            # What is still running now is cancelled (within CANCEL_GRACE_S).
            await runner.cleanup()
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


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host  # RFC 3986 §3.2.2: IPv6 literals in brackets


async def _bind(
    app: web.Application, listen: Listen, limits: ListenerLimits, metrics: Metrics
) -> tuple[web.AppRunner, int]:
    runner = ListenerRunner(
        app,
        limits=limits,
        metrics=metrics,
        # Cancel a handler whose client went away instead of finishing work nobody reads.
        handler_cancellation=True,
        # GatewayServer.stop waits for the requests in flight itself (drain_timeout_s); the
        # runner's own wait is only the grace for cancelled handlers to unwind.
        shutdown_timeout=CANCEL_GRACE_S,
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
    """Run until SIGTERM or SIGINT, then stop gracefully; a second signal ends the shutdown
    delay early (the drain still runs)."""
    server = GatewayServer(config, services)
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
        try:
            await stop.wait()
            log.info("gateway.signal", signal=received[0] if received else None)
        finally:
            await server.stop()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
