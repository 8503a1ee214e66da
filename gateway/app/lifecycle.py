"""Both listeners' lifecycle: :class:`GatewayServer` (start, graceful stop) and :func:`serve`.

Shutdown is graceful (:meth:`GatewayServer.stop`): readiness goes false first, the public
listener stops accepting, in-flight requests get ``limits.drain_timeout_s`` to finish (then they
are cancelled), background tasks stop, outbound client sessions are closed, and the ops listener
goes last so probes see "draining" until the end.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

import gateway
from gateway.app.ops import build_ops_app
from gateway.app.public import build_public_app
from gateway.app.services import Readiness, ReadinessCheck, Services
from gateway.config import Config, Listen
from gateway.observability.logging import get_logger

__all__ = ["MAX_HEADER_FIELD_BYTES", "GatewayServer", "serve"]

log = get_logger("gateway.app")

MAX_HEADER_FIELD_BYTES: Final = 16_384
"""Largest request line / header field the listeners accept (aiohttp's default is 8190)."""


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
