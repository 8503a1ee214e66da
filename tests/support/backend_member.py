"""A federation member built from its settings alone, for unit tests of the federation: nothing
is started, its URL is a closed loopback port, its credential a literal bearer."""

from __future__ import annotations

from gateway.backend.upstream_backend import UpstreamBackend
from gateway.config import BackendConfig, Config, CredentialConfig, IssuerConfig, Secret
from gateway.outbound.client import Outbound

__all__ = ["backend_member"]


def backend_member(name: str, outbound: Outbound, prefix: str | None = None) -> UpstreamBackend:
    """Backend ``name`` with the tool-name prefix ``prefix`` (``name__`` when not given)."""
    settings = BackendConfig(
        url=f"http://127.0.0.1:9/{name}",
        credential=CredentialConfig(type="bearer", token=Secret(f"{name}-secret", "literal")),
        allow_insecure_http=True,
        name=name,
        name_prefix=f"{name}__" if prefix is None else prefix,
    )
    config = Config(
        source="test",
        resource="https://mcp.example.com/mcp",
        issuer=IssuerConfig(url="http://127.0.0.1:1", client_id="gw"),
        backend=None,
        backends=(settings,),
        policy_paths=(),
    )
    return UpstreamBackend(config, outbound, settings=settings)
