"""Fixtures for the development issuer and demo backend tests: real servers on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.dev.demo_backend import DemoBackend
from gateway.dev.dev_issuer import DevIssuer
from tests.support.dev_http import HttpClient, http_client

RESOURCE = "http://127.0.0.1:8080/mcp"
GATEWAY_ID = "mcp-gateway"
GATEWAY_SECRET = "gateway-introspection-secret"
SERVICE_TOKEN = "backend-service-token"


@pytest.fixture
async def issuer() -> AsyncIterator[DevIssuer]:
    dev = DevIssuer(resources=[RESOURCE], grant_scopes=["notes:read"])
    await dev.start()
    dev.register_client(
        GATEWAY_ID,
        GATEWAY_SECRET,
        grant_types=["client_credentials"],
        scopes=["mcp:access"],
        can_introspect=True,
    )
    try:
        yield dev
    finally:
        await dev.stop()


@pytest.fixture
async def backend() -> AsyncIterator[DemoBackend]:
    dev = DemoBackend(service_token=SERVICE_TOKEN)
    await dev.start()
    try:
        yield dev
    finally:
        await dev.stop()


@pytest.fixture
async def http() -> AsyncIterator[HttpClient]:
    async with http_client() as session:
        yield session
