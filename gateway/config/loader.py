"""Load ``gateway.yaml`` into one immutable :class:`~gateway.config.model.Config`.

Order of work: parse YAML with positions, validate against the packaged JSON Schema
(``gateway/schema/gateway.schema.json``, also shipped as ``docs/schema/gateway.schema.json`` for
editors), then the semantic checks of each section (URLs, CIDRs, secret references). Every
finding is collected and reported at once as ``file:line:column: key.path: message``;
:func:`load_config` raises :class:`~gateway.errors.ConfigError` with all of them.

A new top-level key gets its own ``build_*`` function (``sections.py``, or a module of its own
when it is as large as ``issuer.py`` or ``backend.py``) and one line in :func:`build_config`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gateway.config.backend import build_backend
from gateway.config.builder import Builder
from gateway.config.issuer import build_issuer, issuer_allows_insecure_http
from gateway.config.model import (
    Config,
    Listen,
    LoggingConfig,
    ProtocolConfig,
    ServerInfo,
)
from gateway.config.sections import (
    build_allowed_origins,
    build_audit,
    build_limits,
    build_policy_paths,
    build_resource,
    build_trusted_proxies,
)
from gateway.config.state import build_admin, build_state
from gateway.errors import ConfigError
from gateway.yaml_source import SchemaValidator, load_yaml

__all__ = ["build_config", "load_config"]


def load_config(path: str | Path, environ: dict[str, str] | None = None) -> Config:
    """Load ``path``; raise :class:`ConfigError` listing every problem (file:line:col)."""
    file_path = Path(path)
    doc = load_yaml(file_path)
    if doc.problems:
        raise ConfigError(doc.problems)
    if not isinstance(doc.value, dict):
        raise ConfigError([f"{file_path}:1:1: (top level): must be a mapping"])
    SchemaValidator.packaged("gateway.schema.json").check(doc)
    if doc.problems:
        raise ConfigError(doc.problems)
    b = Builder(doc, file_path.resolve().parent, dict(os.environ if environ is None else environ))
    config = build_config(b, doc.value, str(file_path))
    if doc.problems:
        raise ConfigError(doc.problems)
    return config


def build_config(b: Builder, raw: dict[str, Any], source: str) -> Config:
    """Assemble a schema-valid document, section by section (problems go to ``b.doc``)."""
    dev_http = issuer_allows_insecure_http(raw)
    resource = build_resource(b, raw["resource"], dev_http=dev_http)
    issuer = build_issuer(b, raw["issuer"])
    backend = build_backend(b, raw["backend"], dev_http=dev_http)
    policy_paths = build_policy_paths(b, raw["policy"])
    limits = build_limits(raw.get("limits", {}))
    trusted_proxies = build_trusted_proxies(b, raw.get("trusted_proxies", []))
    allowed_origins = build_allowed_origins(b, raw.get("allowed_origins", []))
    audit = build_audit(b, raw.get("audit", {}))
    state = build_state(b, raw.get("state", {}))
    admin = build_admin(b, raw.get("admin", {}), issuer.cache)
    return Config(
        source=source,
        resource=resource,
        issuer=issuer,
        backend=backend,
        policy_paths=policy_paths,
        server=ServerInfo(**raw.get("server", {})),
        listen=Listen(**{"host": "0.0.0.0", "port": 8080, **raw.get("listen", {})}),  # noqa: S104
        ops_listen=Listen(**{"host": "127.0.0.1", "port": 9090, **raw.get("ops_listen", {})}),
        policy_poll_s=float(raw.get("policy_poll_s", 2.0)),
        limits=limits,
        protocol=ProtocolConfig(**raw.get("protocol", {})),
        trusted_proxies=trusted_proxies,
        allowed_origins=allowed_origins,
        logging=LoggingConfig(**raw.get("logging", {})),
        audit=audit,
        state=state,
        admin=admin,
        warnings=tuple(b.warnings),
    )
