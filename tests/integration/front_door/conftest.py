"""Fixtures for the front-door tests: a running gateway with the fakes of tests/support."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.support.gateway_harness import Gateway, start_gateway

MakeGateway = Callable[..., Awaitable[Gateway]]


@pytest.fixture
def make_gw(aiohttp_server: Any, aiohttp_client: Any) -> MakeGateway:
    """``await make_gw(max_in_flight=1, ...)``: a gateway with overridden limits."""

    async def make(**kwargs: Any) -> Gateway:
        return await start_gateway(aiohttp_server, aiohttp_client, **kwargs)

    return make


@pytest.fixture
async def gw(make_gw: MakeGateway) -> Gateway:
    return await make_gw()
