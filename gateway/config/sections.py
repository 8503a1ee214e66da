"""The gateway-wide sections: ``resource``, ``policy``, ``limits``, ``trusted_proxies``,
``allowed_origins`` and ``audit``. ``issuer:`` and ``backend:`` have modules of their own.

One function per section; each takes the section's raw (schema-valid) value and records its
problems through the :class:`~gateway.config.builder.Builder`.
"""

from __future__ import annotations

import importlib.util
import ipaddress
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from gateway.config.audit_key import checkpoint_key_problem
from gateway.config.builder import Builder
from gateway.config.declare import fill
from gateway.config.limits_model import Limits
from gateway.config.model import AuditCheckpoint, AuditConfig, OtlpConfig, TracingConfig
from gateway.config.urls import canonical_uri
from gateway.yaml_source import PathPart

__all__ = [
    "TRACING_PACKAGES",
    "build_allowed_origins",
    "build_audit",
    "build_limits",
    "build_policy_paths",
    "build_resource",
    "build_tracing",
    "build_trusted_proxies",
    "otel_installed",
]


def build_resource(b: Builder, resource_raw: str, *, dev_http: bool) -> str:
    """The canonical resource URI (RFC 8707): the exact MCP endpoint URL."""
    doc = b.doc
    b.url(resource_raw, ("resource",), insecure_ok=dev_http)
    if urlsplit(resource_raw).query:
        doc.problem(("resource",), "must not contain a query (RFC 8707 §2)")
    resource = canonical_uri(resource_raw)
    if resource.endswith("/") and urlsplit(resource).path != "/":
        doc.problem(("resource",), "must not end with '/' (use the exact MCP endpoint URL)")
    return resource


def build_policy_paths(b: Builder, raw_policy: str | list[str]) -> tuple[Path, ...]:
    """``policy:`` is one path or a list of paths (files or directories)."""
    policy_list = [raw_policy] if isinstance(raw_policy, str) else list(raw_policy)
    policy_paths = []
    for index, item in enumerate(policy_list):
        where: tuple[PathPart, ...] = (
            ("policy",) if isinstance(raw_policy, str) else ("policy", index)
        )
        resolved = b.path(item)
        if not resolved.exists():
            b.doc.problem(where, f"policy path not found: {resolved}")
        policy_paths.append(resolved)
    return tuple(policy_paths)


def build_limits(b: Builder, raw_limits: dict[str, Any]) -> Limits:
    return fill(b, Limits, raw_limits, ("limits",))


def build_trusted_proxies(
    b: Builder, raw_proxies: list[str]
) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    proxies = []
    for index, cidr in enumerate(raw_proxies):
        try:
            proxies.append(ipaddress.ip_network(cidr, strict=False))
        except ValueError:
            b.doc.problem(("trusted_proxies", index), "not an IP address or CIDR range")
    return tuple(proxies)


def build_allowed_origins(b: Builder, raw_origins: list[str]) -> frozenset[str]:
    origins = []
    for index, origin in enumerate(raw_origins):
        parts = urlsplit(origin)
        if parts.scheme not in {"http", "https"} or not parts.netloc or parts.path not in {"", "/"}:
            b.doc.problem(
                ("allowed_origins", index), "must be an origin like https://app.example.com"
            )
        origins.append(f"{parts.scheme}://{parts.netloc}".lower())
    return frozenset(origins)


def build_audit(b: Builder, raw_audit: dict[str, Any]) -> AuditConfig:
    given: dict[str, Any] = {"checkpoint": None}
    if raw_audit.get("sink") is False:  # YAML 1.1: a bare `off` is the boolean false
        given["sink"] = "off"
    if raw_audit.get("sink") == "file" and "path" not in raw_audit:
        b.doc.problem(("audit",), "path is required with sink: file")
    if "path" in raw_audit:
        given["path"] = str(b.path(raw_audit["path"]))
    if "checkpoint" in raw_audit:
        raw_checkpoint = raw_audit["checkpoint"]
        where: tuple[PathPart, ...] = ("audit", "checkpoint")
        key = b.secret(raw_checkpoint["key"], (*where, "key"))
        if key is not None and not key.skipped:
            problem = checkpoint_key_problem(key.reveal())
            if problem is not None:
                b.doc.problem((*where, "key"), problem)
        if key is not None:
            given["checkpoint"] = fill(b, AuditCheckpoint, raw_checkpoint, where, key=key)
    return fill(b, AuditConfig, raw_audit, ("audit",), **given)


TRACING_PACKAGES: Final = (
    "needs the OpenTelemetry packages (the otel extra, which the container image has): "
    "pip install '.[otel]' in a clone of the gateway"
)
_OTEL_MODULES: Final = {
    "http/protobuf": ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http"),
    "grpc": ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.grpc"),
}


def otel_installed(protocol: str) -> bool:
    """Whether the OpenTelemetry modules ``tracing:`` with ``protocol`` imports are installed
    (found, not imported: ``check`` and ``serve`` say so before anything starts)."""
    for name in _OTEL_MODULES.get(protocol, _OTEL_MODULES["http/protobuf"]):
        try:
            if importlib.util.find_spec(name) is None:
                return False
        except ImportError:  # a parent package is missing
            return False
    return True


def build_tracing(b: Builder, raw: dict[str, Any] | None) -> TracingConfig | None:
    """``tracing:`` (None when absent: no tracing at all). The OTLP endpoint is an outbound
    URL like the issuers' (``http`` only to loopback or private addresses: a collector is
    usually a sidecar or in the cluster); header values are secret references."""
    if raw is None:
        return None
    tp: tuple[PathPart, ...] = ("tracing", "otlp")
    otlp = raw["otlp"]
    endpoint = b.url(otlp["endpoint"], (*tp, "endpoint"), insecure_ok=True, private_ok=True)
    headers = []
    for name, ref in sorted(otlp.get("headers", {}).items()):
        secret = b.secret(ref, (*tp, "headers", name))
        if secret is not None:
            headers.append((name.lower(), secret))
    exporter = fill(b, OtlpConfig, otlp, tp, endpoint=endpoint, headers=tuple(headers))
    if not otel_installed(exporter.protocol):
        b.doc.problem(("tracing",), TRACING_PACKAGES)
    return fill(b, TracingConfig, raw, ("tracing",), otlp=exporter)
