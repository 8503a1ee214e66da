"""The ``issuer:`` section: the authorization server whose tokens the gateway accepts."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from gateway.config.builder import Builder
from gateway.config.model import CacheConfig, IssuerConfig, parse_rate
from gateway.config.urls import canonical_uri
from gateway.yaml_source import PathPart

__all__ = ["build_issuer", "issuer_allows_insecure_http"]


def issuer_allows_insecure_http(raw: dict[str, Any]) -> bool:
    """The issuer's ``allow_insecure_http`` is the document's development switch: it also
    permits plain http for ``resource`` and the backend credential's token endpoint."""
    return bool(raw["issuer"].get("allow_insecure_http", False))


def build_issuer(b: Builder, ri: dict[str, Any]) -> IssuerConfig:
    doc = b.doc
    ip: tuple[PathPart, ...] = ("issuer",)
    dev_http = bool(ri.get("allow_insecure_http", False))
    b.url(ri["url"], (*ip, "url"), insecure_ok=dev_http)
    for key in ("introspection_endpoint", "token_endpoint"):
        if key in ri:
            b.url(ri[key], (*ip, key), insecure_ok=dev_http)
    client_auth = ri.get("client_auth", "client_secret_basic")
    client_secret = b.secret(ri.get("client_secret"), (*ip, "client_secret"))
    private_key = b.secret(ri.get("private_key"), (*ip, "private_key"))
    if client_auth == "private_key_jwt":
        if "private_key" not in ri:
            doc.problem(ip, "private_key is required with client_auth: private_key_jwt")
    elif "client_secret" not in ri:
        doc.problem(ip, f"client_secret is required with client_auth: {client_auth}")
    audience = ri.get("assertion_audience", "issuer")
    if "assertion_audience" in ri and client_auth != "private_key_jwt":
        b.warnings.append(
            f"{doc.where((*ip, 'assertion_audience'))}: issuer.assertion_audience: applies only "
            "to client_auth: private_key_jwt and is ignored"
        )
    if (
        audience == "token_endpoint"
        and "introspection_endpoint" in ri
        and "token_endpoint" not in ri
    ):
        # A configured introspection endpoint skips discovery, so nothing would name it.
        doc.problem(
            (*ip, "assertion_audience"),
            "token_endpoint needs issuer.token_endpoint when introspection_endpoint is "
            "configured (metadata discovery is skipped)",
        )
    rc = ri.get("cache", {})
    return IssuerConfig(
        url=ri["url"],
        client_id=ri["client_id"],
        client_auth=client_auth,
        client_secret=client_secret,
        private_key=private_key,
        private_key_id=ri.get("private_key_id"),
        signing_alg=ri.get("signing_alg", "RS256"),
        assertion_audience=audience,
        introspection_endpoint=ri.get("introspection_endpoint"),
        token_endpoint=ri.get("token_endpoint"),
        timeout_s=float(ri.get("timeout_s", 3.0)),
        metadata_refresh_s=float(ri.get("metadata_refresh_s", 3600.0)),
        allow_insecure_http=dev_http,
        require_iss=bool(ri.get("require_iss", False)),
        clock_skew_s=int(ri.get("clock_skew_s", 30)),
        subject_fallback=ri.get("subject_fallback", "none"),
        # Only URIs are normalised (RFC 8707); plain audience names ("mcp-gateway") stay as is.
        audiences=tuple(
            canonical_uri(a) if urlsplit(a).netloc else a for a in ri.get("audiences", [])
        ),
        cache=CacheConfig(**rc),
        failed_auth_probe_interval_s=float(ri.get("failed_auth_probe_interval_s", 5.0)),
        **(
            {"failed_auth_rate": parse_rate(ri["failed_auth_rate"])}
            if "failed_auth_rate" in ri
            else {}
        ),
    )
