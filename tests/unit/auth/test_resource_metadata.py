"""RFC 9728 §2 protected resource metadata document content."""

from __future__ import annotations

import dataclasses

from gateway.auth.resource_metadata import protected_resource_metadata
from gateway.config import (
    BackendConfig,
    Config,
    CredentialConfig,
    IssuerConfig,
    Secret,
    ServerInfo,
)


def config(**server: str) -> Config:
    return Config(
        source="test",
        resource="https://mcp.example.com/mcp",
        issuer=IssuerConfig(
            url="https://id.example.com/realms/acme",
            client_id="gw",
            client_secret=Secret("s", "literal"),
        ),
        backend=BackendConfig(
            url="http://tools.internal/mcp",
            credential=CredentialConfig(type="bearer", token=Secret("b", "literal")),
        ),
        policy_paths=(),
        server=dataclasses.replace(ServerInfo(), **server),
    )


def test_the_document_names_the_resource_exactly_and_the_issuer() -> None:
    doc = protected_resource_metadata(config(), ("mcp:access", "docs:read"))
    assert doc == {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://id.example.com/realms/acme"],
        "scopes_supported": ["mcp:access", "docs:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "MCP resource gateway",
    }


def test_documentation_is_included_when_configured_and_empty_scopes_are_omitted() -> None:
    doc = protected_resource_metadata(
        config(resource_documentation="https://docs.example.com/mcp"), ()
    )
    assert doc["resource_documentation"] == "https://docs.example.com/mcp"
    assert "scopes_supported" not in doc


def test_the_prm_url_follows_rfc_9728_path_insertion() -> None:
    cfg = config()
    assert cfg.prm_path == "/.well-known/oauth-protected-resource/mcp"
    assert cfg.prm_url == "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
