"""Fixtures for auth integration tests: a loopback IssuerStub and ResourceServer factories."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from gateway.auth.resource_server import ResourceServer
from gateway.limits.memory import MemoryRateLimiter
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Outbound
from tests.support.auth import FakeClock, MakeRS, make_config
from tests.support.test_issuer import IssuerStub


@pytest.fixture
async def stub(aiohttp_server: Any) -> IssuerStub:
    issuer = IssuerStub()
    server = await aiohttp_server(issuer.app())
    return issuer.bind(str(server.make_url("/")))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
async def make_rs(stub: IssuerStub, clock: FakeClock, metrics: Metrics) -> AsyncIterator[MakeRS]:
    """Build, start and (at teardown) close ResourceServers against ``stub``."""
    made: list[tuple[ResourceServer, Outbound]] = []

    async def factory(
        *, baseline: tuple[str, ...] = ("mcp:access",), start: bool = True, **overrides: Any
    ) -> ResourceServer:
        config = make_config(stub, **overrides)
        outbound = Outbound()
        rs = ResourceServer(
            config,
            outbound,
            metrics=metrics,
            limiter=MemoryRateLimiter(clock=clock),
            clock=clock,
            baseline_scopes=lambda: baseline,
            discovery_retry_s=0.05,
        )
        made.append((rs, outbound))
        if start:
            await rs.start()
        return rs

    yield factory
    for rs, outbound in made:
        await rs.close()
        await outbound.close()
