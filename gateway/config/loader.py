"""Load ``gateway.yaml`` into one immutable :class:`~gateway.config.model.Config`.

Order of work: parse YAML with positions, validate against the packaged JSON Schema
(``gateway/schema/gateway.schema.json``, also shipped as ``docs/schema/gateway.schema.json`` for
editors), then the semantic checks of each section (URLs, CIDRs, secret references). Every
finding is collected and reported at once as ``file:line:column: key.path: message``;
:func:`load_config` raises :class:`~gateway.errors.ConfigError` with all of them.

A key is declared once, as a field of its section's dataclass (:mod:`gateway.config.declare`):
a key without checks of its own needs nothing here, :func:`~gateway.config.declare.fill` reads
it. A section with checks (URLs, secrets, files, keys that depend on each other) has a
``build_*`` function (``sections.py``, or a module of its own when it is as large as
``issuer.py`` or ``backend.py``) and one line in :func:`_sections`. docs/architecture.md says
how to add a key.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from gateway.config.approval_settings import build_approvals
from gateway.config.backend import build_backends, check_token_exchange
from gateway.config.backend_model import BackendConfig
from gateway.config.builder import Builder
from gateway.config.catalog import build_catalog
from gateway.config.declare import declared_default, fill
from gateway.config.guardrails import build_guardrails
from gateway.config.identity import build_identity_jwks
from gateway.config.input_requests import build_input_requests
from gateway.config.issuer import build_issuers, issuer_allows_insecure_http, issuer_entries
from gateway.config.issuer_model import CacheConfig, IssuerConfig
from gateway.config.login import build_login
from gateway.config.model import Config, InputRequestsConfig, Listen
from gateway.config.policy_external import build_policy_external
from gateway.config.secrets import Secret
from gateway.config.sections import (
    build_allowed_origins,
    build_audit,
    build_limits,
    build_policy_paths,
    build_resource,
    build_tracing,
    build_trusted_proxies,
)
from gateway.config.state import build_admin, build_state
from gateway.config.tasks import build_tasks
from gateway.config.user_oauth import build_user_oauth
from gateway.errors import ConfigError
from gateway.yaml_source import SchemaValidator, load_yaml

__all__ = [
    "ConfigReport",
    "backend_prefixes",
    "build_config",
    "inspect_config",
    "load_config",
    "load_ops_access",
]


@dataclass(frozen=True, slots=True)
class ConfigReport:
    """Everything :func:`inspect_config` found: the config (None when it is invalid), every
    problem of every stage, the warnings, and the policy paths, the backends' name prefixes and
    the issuers' urls when they could be read."""

    config: Config | None
    problems: tuple[str, ...]
    warnings: tuple[str, ...]
    policy_paths: tuple[Path, ...] | None
    backend_prefixes: tuple[str, ...] | None = None
    issuer_urls: tuple[str, ...] = ()
    guardrails: tuple[str, ...] | None = None
    """The names of ``guardrails:`` (what a policy rule may name); None when unreadable."""


def load_config(
    path: str | Path,
    environ: dict[str, str] | None = None,
    *,
    resolve_secrets: bool | Collection[str] = True,
) -> Config:
    """Load ``path``; raise :class:`ConfigError` listing every problem (file:line:col)."""
    report = inspect_config(path, environ, resolve_secrets=resolve_secrets)
    if report.problems or report.config is None:
        raise ConfigError(list(report.problems))
    return report.config


def inspect_config(
    path: str | Path,
    environ: dict[str, str] | None = None,
    *,
    resolve_secrets: bool | Collection[str] = True,
) -> ConfigReport:
    """Every problem of ``path`` in one pass, as ``mcp-gateway check`` reports them.

    The section checks (URLs, CIDRs, secret references, policy paths) run even when the schema
    found problems, each section on its own, so a missing secret is one finding among the
    others; a section too malformed to check is left to the schema's findings. With
    ``resolve_secrets=False`` secret references are taken as given (``check --skip-secrets``,
    for CI without production secrets); a collection of top-level keys reads only theirs.
    """
    file_path = Path(path)
    doc = load_yaml(file_path)
    if doc.problems:
        return ConfigReport(None, tuple(doc.problems), (), None)
    if not isinstance(doc.value, dict):
        return ConfigReport(None, (f"{file_path}:1:1: (top level): must be a mapping",), (), None)
    SchemaValidator.packaged("gateway.schema.json").check(doc)
    b = Builder(
        doc,
        file_path.resolve().parent,
        dict(os.environ if environ is None else environ),
        resolve_secrets=resolve_secrets,
    )
    if not doc.problems:
        try:
            config = build_config(b, doc.value, str(file_path))
        except ConfigError:  # no issuer at all: nothing else to build a Config from
            return ConfigReport(None, tuple(doc.problems), tuple(b.warnings), None)
        return ConfigReport(
            None if doc.problems else config,
            tuple(doc.problems),
            config.warnings,
            config.policy_paths,
            backend_prefixes(config.backends),
            config.issuer_urls,
            tuple(processor.name for processor in config.guardrails),
        )
    sections = _sections(b, doc.value, guarded=True)
    return ConfigReport(
        None,
        tuple(doc.problems),
        tuple(b.warnings),
        sections.get("policy_paths"),
        backend_prefixes(sections["backends"]) if "backends" in sections else None,
        tuple(i.url for i in (sections.get("issuer"), *sections.get("more_issuers", ())) if i),
        None if "guardrails" not in sections else tuple(p.name for p in sections["guardrails"]),
    )


def load_ops_access(
    path: str | Path, environ: dict[str, str] | None = None
) -> tuple[Listen, Secret | None]:
    """``ops_listen`` and ``admin.token`` of ``path``, for a client of the ops listener
    (``mcp-gateway revoke``).

    Only these two sections are checked and only ``admin.token`` is resolved: the file's other
    secrets (and files) may exist only where the gateway runs. Raises :class:`ConfigError`
    (``file:line:col``) for a YAML problem or a problem in one of the two sections.
    """
    file_path = Path(path)
    doc = load_yaml(file_path)
    if not doc.problems and not isinstance(doc.value, dict):
        doc.problem((), "must be a mapping")
    if doc.problems:
        raise ConfigError(list(doc.problems))
    SchemaValidator.packaged("gateway.schema.json").check(doc)
    found = [problem for problem in doc.problems if _OPS_ACCESS.search(problem)]
    if found:
        raise ConfigError(found)
    doc.problems.clear()
    b = Builder(doc, file_path.resolve().parent, dict(os.environ if environ is None else environ))
    token = b.secret(doc.value.get("admin", {}).get("token"), ("admin", "token"))
    if doc.problems:
        raise ConfigError(list(doc.problems))
    return _ops_listen(doc.value), token


_OPS_ACCESS: Final = re.compile(r":\d+:\d+: (ops_listen|admin)\b")
"""A finding (``file:line:col: key.path: message``) about ``ops_listen`` or ``admin``."""


def _ops_listen(raw: dict[str, Any]) -> Listen:
    default: Listen = declared_default(Config, "ops_listen")
    return replace(default, **raw.get("ops_listen", {}))


def backend_prefixes(backends: Sequence[BackendConfig]) -> tuple[str, ...]:
    """The name prefixes of ``backends``: every advertised tool and prompt name starts with one
    (:func:`gateway.policy.warnings.unreachable_rules` checks the policy against them)."""
    return tuple(backend.name_prefix for backend in backends)


def build_config(b: Builder, raw: dict[str, Any], source: str) -> Config:
    """Assemble a schema-valid document, section by section (problems go to ``b.doc``).

    Raises ConfigError when there is no issuer (neither ``issuer:`` nor ``issuers:``)."""
    sections = _sections(b, raw, guarded=False)
    if "issuer" not in sections:
        raise ConfigError(list(b.doc.problems))
    # The keys without checks of their own (server, listen, protocol, ...) are read as declared.
    return fill(b, Config, raw, (), source=source, warnings=tuple(b.warnings), **sections)


def _sections(b: Builder, raw: dict[str, Any], *, guarded: bool) -> dict[str, Any]:
    """Every section with semantic checks, by its ``Config`` field name.

    ``guarded`` (a document the schema refused): each section is checked on its own and one
    that is too malformed to check is left out (the schema already said why), so the others'
    problems, a missing secret among them, are still found.
    """
    out: dict[str, Any] = {}

    def section(name: str, build: Callable[[], Any]) -> None:
        if not guarded:
            out[name] = build()
            return
        with contextlib.suppress(Exception):
            out[name] = build()

    dev_http = _dev_http(raw)
    section("resource", lambda: build_resource(b, raw["resource"], dev_http=dev_http))
    section("issuers", lambda: build_issuers(b, raw))
    issuers = out.pop("issuers", ())
    if issuers:  # issuer: is the first entry, the rest follow (Config.issuers lists them all)
        out["issuer"], out["more_issuers"] = issuers[0], issuers[1:]
    section("backends", lambda: build_backends(b, raw, dev_http=dev_http))
    if "backends" in out:
        # The `backend:` section as written (None with `backends:`); see Config.backend.
        out["backend"] = out["backends"][0] if "backend" in raw and out["backends"] else None
    if "backends" in out and "resource" in out:
        section(
            "_exchange",
            lambda: check_token_exchange(b, raw, out["backends"], issuers, out["resource"]),
        )
        out.pop("_exchange", None)
    signing = any(backend.identity.assertion for backend in out.get("backends", ()))
    section(
        "identity_jwks",
        lambda: build_identity_jwks(b, raw.get("identity_jwks", {}), signing=signing),
    )
    if not guarded or _valid_policy_key(raw.get("policy")):
        section("policy_paths", lambda: build_policy_paths(b, raw["policy"]))
    section("limits", lambda: build_limits(b, raw.get("limits", {})))
    section("trusted_proxies", lambda: build_trusted_proxies(b, raw.get("trusted_proxies", [])))
    section("allowed_origins", lambda: build_allowed_origins(b, raw.get("allowed_origins", [])))
    section("audit", lambda: build_audit(b, raw.get("audit", {})))
    section("tracing", lambda: build_tracing(b, raw.get("tracing")))
    section("policy_external", lambda: build_policy_external(b, raw.get("policy_external")))
    section("catalog", lambda: build_catalog(b, raw.get("catalog")))
    section("guardrails", lambda: build_guardrails(b, raw.get("guardrails"), dev_http=dev_http))
    section("approvals", lambda: build_approvals(b, raw.get("approvals"), dev_http=dev_http))
    section("state", lambda: build_state(b, raw.get("state", {})))
    # A revocation marker must outlive the longest any issuer's cache may hold a token.
    section("admin", lambda: build_admin(b, raw.get("admin", {}), _longest_cache(issuers)))
    section(
        "input_requests",
        lambda: build_input_requests(b, raw.get("input_requests", {}), out["limits"].json),
    )
    if "input_requests" in out:
        section("_dpop", lambda: _check_dpop_nonce(b, raw, out["input_requests"]))
        out.pop("_dpop", None)
        section("tasks", lambda: build_tasks(b, raw.get("tasks", {}), out["input_requests"]))
    if "input_requests" in out and "resource" in out:
        section(
            "login",
            lambda: build_login(
                b, raw.get("login"), issuers, out["resource"], out["input_requests"]
            ),
        )
    if "backends" in out:
        section(
            "user_oauth",
            lambda: build_user_oauth(
                b,
                raw.get("user_oauth"),
                out["backends"],
                out.get("login"),
                single="backend" in raw,
            ),
        )
    return out


def _check_dpop_nonce(b: Builder, raw: dict[str, Any], inputs: InputRequestsConfig) -> None:
    """``dpop.nonce`` derives its key from the keys the replicas already share (not stored)."""
    if inputs.seal_keys:
        return
    for path, entry in issuer_entries(raw):
        dpop = entry.get("dpop")
        if isinstance(dpop, dict) and dpop.get("nonce") is True:
            b.doc.problem(
                (*path, "dpop", "nonce"),
                "needs input_requests.seal_keys (the DPoP nonce key is derived from them)",
            )


def _longest_cache(issuers: tuple[IssuerConfig, ...]) -> CacheConfig:
    if not issuers:
        return CacheConfig()
    return max(issuers, key=lambda i: i.cache.max_ttl_s + i.cache.stale_if_error_s).cache


def _dev_http(raw: dict[str, Any]) -> bool:
    issuer, issuers = raw.get("issuer"), raw.get("issuers", [])
    well_formed = isinstance(issuer, dict) or (
        isinstance(issuers, list) and all(isinstance(entry, dict) for entry in issuers)
    )
    return well_formed and issuer_allows_insecure_http(raw)


def _valid_policy_key(policy: Any) -> bool:
    # Only the schema-valid forms: "" would make the config's own directory the policy set.
    if isinstance(policy, str):
        return bool(policy)
    return (
        isinstance(policy, list)
        and bool(policy)
        and all(isinstance(item, str) and item for item in policy)
    )
