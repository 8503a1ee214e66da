"""The ``backend:`` section: the upstream MCP server, its service credential and its TLS."""

from __future__ import annotations

from typing import Any

from gateway.config.builder import Builder
from gateway.config.model import BackendConfig, CredentialConfig, TlsConfig
from gateway.yaml_source import PathPart

__all__ = ["build_backend", "build_credential", "build_tls"]


def build_backend(b: Builder, rb: dict[str, Any], *, dev_http: bool) -> BackendConfig:
    """``dev_http``: plain http is allowed for a loopback credential token endpoint."""
    bp: tuple[PathPart, ...] = ("backend",)
    insecure_backend = bool(rb.get("allow_insecure_http", False))
    b.url(rb["url"], (*bp, "url"), insecure_ok=insecure_backend, private_ok=True)
    credential = build_credential(b, rb["credential"], (*bp, "credential"), dev_http=dev_http)
    tls = build_tls(b, rb.get("tls", {}), (*bp, "tls"))
    return BackendConfig(
        url=rb["url"],
        credential=credential,
        allow_insecure_http=insecure_backend,
        tls=tls,
        timeout_s=float(rb.get("timeout_s", 10.0)),
        connect_timeout_s=float(rb.get("connect_timeout_s", 3.0)),
        catalog_refresh_s=float(rb.get("catalog_refresh_s", 300.0)),
        name_prefix=rb.get("name_prefix", ""),
        identity_headers=bool(rb.get("identity_headers", False)),
        tool_timeouts_s=tuple((k, float(v)) for k, v in rb.get("tool_timeouts_s", {}).items()),
        max_connections=int(rb.get("max_connections", 100)),
    )


def build_credential(
    b: Builder, rcred: dict[str, Any], cp: tuple[PathPart, ...], *, dev_http: bool
) -> CredentialConfig:
    doc = b.doc
    if rcred["type"] == "bearer":
        return CredentialConfig(type="bearer", token=b.secret(rcred["token"], (*cp, "token")))
    cc_auth = rcred.get("client_auth", "client_secret_basic")
    if cc_auth == "private_key_jwt" and "private_key" not in rcred:
        doc.problem(cp, "private_key is required with client_auth: private_key_jwt")
    if cc_auth != "private_key_jwt" and "client_secret" not in rcred:
        doc.problem(cp, f"client_secret is required with client_auth: {cc_auth}")
    if "token_endpoint" in rcred:
        b.url(rcred["token_endpoint"], (*cp, "token_endpoint"), insecure_ok=dev_http)
    return CredentialConfig(
        type="client_credentials",
        client_id=rcred["client_id"],
        client_secret=b.secret(rcred.get("client_secret"), (*cp, "client_secret")),
        client_auth=cc_auth,
        private_key=b.secret(rcred.get("private_key"), (*cp, "private_key")),
        private_key_id=rcred.get("private_key_id"),
        token_endpoint=rcred.get("token_endpoint"),
        scope=rcred.get("scope"),
        resource=rcred.get("resource"),
        audience=rcred.get("audience"),
        refresh_margin_s=int(rcred.get("refresh_margin_s", 30)),
    )


def build_tls(b: Builder, rtls: dict[str, Any], tp: tuple[PathPart, ...]) -> TlsConfig:
    doc = b.doc
    tls = TlsConfig(**{k: str(b.path(v)) for k, v in rtls.items()})
    if (tls.client_cert is None) != (tls.client_key is None):
        doc.problem(tp, "client_cert and client_key go together")
    for key, value in rtls.items():
        if not b.path(value).is_file():
            doc.problem((*tp, key), f"file not found: {b.path(value)}")
    return tls
