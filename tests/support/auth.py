"""Helpers shared by the auth tests: configs against an IssuerStub, a settable clock."""

from __future__ import annotations

import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from gateway.auth.resource_server import ResourceServer
from gateway.config import (
    BackendConfig,
    CacheConfig,
    Config,
    CredentialConfig,
    IssuerConfig,
    Secret,
)
from gateway.observability.metrics import Metrics

from .test_issuer import IssuerStub

__all__ = ["RESOURCE", "FakeClock", "MakeRS", "closed_port", "make_config", "sample"]

RESOURCE = "https://mcp.example.com/mcp"

MakeRS = Callable[..., Awaitable[ResourceServer]]
"""``await make_rs(**issuer_overrides)``: a started ResourceServer against the stub."""


class FakeClock:
    """A settable wall clock (Unix seconds) for cache lifetimes and the failed-auth budget."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def make_config(stub: IssuerStub, **issuer_overrides: Any) -> Config:
    cache = issuer_overrides.pop("cache", CacheConfig())
    issuer = IssuerConfig(
        url=stub.issuer,
        client_id=stub.client_id,
        client_auth="client_secret_basic",
        client_secret=Secret(stub.client_secret, "literal"),
        allow_insecure_http=True,
        timeout_s=1.0,
        cache=cache,
    )
    issuer = replace(issuer, **issuer_overrides)
    return Config(
        source="test",
        resource=RESOURCE,
        issuer=issuer,
        backend=BackendConfig(
            url="http://127.0.0.1:9/mcp",
            credential=CredentialConfig(type="bearer", token=Secret("backend", "literal")),
        ),
        policy_paths=(),
    )


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value("mcp_gateway_" + name, labels)
    return value or 0.0
