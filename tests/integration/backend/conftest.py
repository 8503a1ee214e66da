"""Fixtures for backend integration tests: real loopback upstreams and a configured backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from gateway.backend.upstream_backend import UpstreamBackend
from gateway.config import Config
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Outbound
from tests.support.upstreams import LegacyUpstream, ModernUpstream

ServerFactory = Callable[..., Awaitable[TestServer]]


@pytest.fixture
async def outbound() -> AsyncIterator[Outbound]:
    out = Outbound()
    yield out
    await out.close()


@pytest.fixture
async def modern(aiohttp_server: ServerFactory) -> tuple[ModernUpstream, str]:
    upstream = ModernUpstream()
    server = await aiohttp_server(upstream.app())
    return upstream, str(server.make_url("/mcp"))


@pytest.fixture
async def legacy(aiohttp_server: ServerFactory) -> tuple[LegacyUpstream, str]:
    upstream = LegacyUpstream()
    server = await aiohttp_server(upstream.app())
    return upstream, str(server.make_url("/mcp"))


@pytest.fixture
async def backend_factory(outbound: Outbound) -> AsyncIterator[Any]:
    made: list[UpstreamBackend] = []

    async def make(config: Config, *, start: bool = True, **kwargs: Any) -> UpstreamBackend:
        backend = UpstreamBackend(
            config, outbound, metrics=kwargs.pop("metrics", Metrics()), **kwargs
        )
        made.append(backend)
        if start:
            await backend.start()
        return backend

    yield make
    for backend in made:
        await backend.close()
