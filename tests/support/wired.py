"""The production gateway (``build_services``) started for a test, with a client session."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from gateway.app import GatewayServer
from gateway.config import load_config
from gateway.wiring.production import build_services

__all__ = ["wired_gateway"]


@contextlib.asynccontextmanager
async def wired_gateway(
    config_path: Path, *, ready_timeout_s: float = 10.0, wait_ready: bool = True
) -> AsyncIterator[tuple[GatewayServer, aiohttp.ClientSession]]:
    """Start ``mcp-gateway serve``'s wiring for ``config_path``; yield once ``/readyz`` is 200
    (``wait_ready=False``: once the listeners are up, for gateways that may never be ready)."""
    config = load_config(config_path)
    server = GatewayServer(config, build_services(config))
    await server.start()
    session = aiohttp.ClientSession()
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ready_timeout_s
        while wait_ready:
            async with session.get(server.ops_url + "/readyz") as response:
                if response.status == 200:
                    break
            if loop.time() > deadline:
                pytest.fail("the gateway never became ready")
            await asyncio.sleep(0.05)
        yield server, session
    finally:
        await session.close()
        await server.stop()
