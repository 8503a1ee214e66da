"""Fixtures for backend integration tests: real loopback upstreams and a configured backend."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # tests/support is imported as a package from the repo root
    sys.path.insert(0, str(ROOT))

from gateway.backend import UpstreamBackend  # noqa: E402
from gateway.config import (  # noqa: E402
    BackendConfig,
    Config,
    CredentialConfig,
    IssuerConfig,
    Limits,
    Secret,
)
from gateway.observability.metrics import Metrics  # noqa: E402
from gateway.outbound import Outbound  # noqa: E402
from gateway.seams import Principal, RequestContext  # noqa: E402
from tests.support.upstreams import LegacyUpstream, ModernUpstream  # noqa: E402

ServerFactory = Callable[..., Awaitable[TestServer]]


def make_config(url: str, **backend: Any) -> Config:
    credential = backend.pop(
        "credential", CredentialConfig(type="bearer", token=Secret("service-secret", "literal"))
    )
    limits = backend.pop("limits", Limits(max_response_bytes=1_048_576))
    issuer = backend.pop("issuer", IssuerConfig(url="http://127.0.0.1:1", client_id="gw"))
    return Config(
        source="test",
        resource="https://mcp.example.com/mcp",
        issuer=issuer,
        backend=BackendConfig(
            url=url, credential=credential, allow_insecure_http=True, timeout_s=5.0, **backend
        ),
        policy_paths=(),
        limits=limits,
    )


def principal() -> Principal:
    return Principal(
        subject="alice@example.com",
        client_id="claude-code",
        scopes=frozenset({"mcp:access"}),
        expires_at=4_000_000_000.0,
        issuer="https://id.example.com",
        fingerprint="fp",
    )


def context(request_id: str = "req-1") -> RequestContext:
    return RequestContext(
        request_id=request_id, trace_id="t" * 32, span_id="s" * 16, started=0.0, client_ip="::1"
    )


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


__all__ = ["context", "make_config", "principal", "replace"]
