"""Builders shared by the backend integration tests (config, principal, request context)."""

from __future__ import annotations

from typing import Any

from gateway.config import (
    BackendConfig,
    Config,
    CredentialConfig,
    IssuerConfig,
    Limits,
    Secret,
)
from gateway.seams import Principal, RequestContext

__all__ = ["context", "make_config", "principal"]


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
