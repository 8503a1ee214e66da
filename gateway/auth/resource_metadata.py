"""RFC 9728 §2 OAuth 2.0 Protected Resource Metadata document for the MCP endpoint.

Served unauthenticated (GET and HEAD) at ``/.well-known/oauth-protected-resource<mcp path>``
(RFC 9728 §3.1) and at the root ``/.well-known/oauth-protected-resource`` (MCP clients that only
probe the root); the routes live in ``gateway/http``, the content is built here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.config import Config

from .challenge import valid_scopes

__all__ = ["protected_resource_metadata"]


def protected_resource_metadata(config: Config, baseline: Sequence[str]) -> dict[str, Any]:
    """The PRM document: ``resource`` is the configured (canonical) resource exactly.

    - ``authorization_servers``: every trusted issuer's ``url``, in configuration order (MCP
      requires at least one; RFC 9728 §2 lets a client pick any);
    - ``scopes_supported``: the policy's baseline scopes (MCP: the minimal set for basic use);
      omitted when there are none;
    - ``bearer_methods_supported``: ``["header"]`` (RFC 6750 §2.1 only; no query, no body);
    - ``resource_name`` and, when configured, ``resource_documentation``;
    - when an issuer accepts DPoP-bound tokens (RFC 9449 §5.1 / RFC 9728 §2):
      ``dpop_signing_alg_values_supported`` (every issuer's ``dpop.algorithms``) and
      ``dpop_bound_access_tokens_required`` (true when every issuer has ``dpop: required``).
    """
    doc: dict[str, Any] = {
        "resource": config.resource,
        "authorization_servers": [issuer.url for issuer in config.issuers],
    }
    scopes = valid_scopes(baseline)
    if scopes:
        doc["scopes_supported"] = list(scopes)
    doc["bearer_methods_supported"] = ["header"]
    doc["resource_name"] = config.server.resource_name
    if config.server.resource_documentation:
        doc["resource_documentation"] = config.server.resource_documentation
    dpop = [issuer.dpop for issuer in config.issuers]
    if any(d.enabled for d in dpop):
        algs = dict.fromkeys(a for d in dpop if d.enabled for a in d.algorithms)
        doc["dpop_signing_alg_values_supported"] = list(algs)
        doc["dpop_bound_access_tokens_required"] = all(d.mode == "required" for d in dpop)
    return doc
