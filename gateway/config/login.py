"""``login:``: the browser login surface's relying party (or external verifier) and its pages.

Checked at load: the named issuer is one of ``issuers:`` (default: the first); the relying
party has a ``client_id`` and what its ``client_auth`` needs (as the introspection client); the
verifier's URLs are https (plain http only to loopback with its ``allow_insecure_http``); the
path prefix is not the MCP path, above it or under ``/.well-known``; and the session cookie can
be sealed: it uses ``input_requests.seal_keys`` (the key ring every replica already shares, with
a derivation label of its own), so those keys are required.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from gateway.config.builder import Builder
from gateway.config.declare import fill
from gateway.config.issuer import checked_algorithms
from gateway.config.issuer_model import CLIENT_AUTHS, IssuerConfig
from gateway.config.login_model import LoginConfig, LoginVerifierConfig
from gateway.config.model import InputRequestsConfig
from gateway.yaml_source import PathPart

__all__ = ["build_login", "login_issuer"]

_WHERE: tuple[PathPart, ...] = ("login",)


def login_issuer(login: LoginConfig, issuers: tuple[IssuerConfig, ...]) -> IssuerConfig | None:
    """The trusted issuer people sign in at: the one ``login.issuer`` names, else the first."""
    if login.issuer is None:
        return issuers[0] if issuers else None
    return next((issuer for issuer in issuers if issuer.url == login.issuer), None)


def build_login(
    b: Builder,
    raw: dict[str, Any] | None,
    issuers: tuple[IssuerConfig, ...],
    resource: str,
    inputs: InputRequestsConfig,
) -> LoginConfig | None:
    """None without the section (no page is served at all)."""
    if raw is None:
        return None
    login = fill(b, LoginConfig, raw, _WHERE, leave=("client_secret", "private_key", "verifier"))
    issuer = login_issuer(login, issuers)
    if issuer is None:
        b.doc.problem((*_WHERE, "issuer"), "must be the url of one of the trusted issuers")
    verifier = _verifier(b, raw["verifier"]) if "verifier" in raw else None
    client_secret = b.secret(raw.get("client_secret"), (*_WHERE, "client_secret"))
    private_key = b.secret(raw.get("private_key"), (*_WHERE, "private_key"))
    if verifier is None and login.client_auth in CLIENT_AUTHS:
        if "client_id" not in raw:
            b.doc.problem(_WHERE, "client_id is required (or an external verifier)")
        if login.client_auth == "private_key_jwt":
            if "private_key" not in raw:
                b.doc.problem(_WHERE, "private_key is required with client_auth: private_key_jwt")
        elif "client_secret" not in raw:
            b.doc.problem(
                _WHERE, f"client_secret is required with client_auth: {login.client_auth}"
            )
    if verifier is not None:
        for key in ("client_id", "client_secret", "private_key", "token_endpoint"):
            if key in raw:
                b.warnings.append(
                    f"{b.doc.where((*_WHERE, key))}: login.{key}: not used with login.verifier "
                    "and is ignored"
                )
    if "token_endpoint" in raw and issuer is not None:
        b.url(
            raw["token_endpoint"],
            (*_WHERE, "token_endpoint"),
            insecure_ok=issuer.allow_insecure_http,
        )
    _check_prefix(b, login.path_prefix, resource)
    if not inputs.seal_keys:
        b.doc.problem(
            _WHERE, "needs input_requests.seal_keys (the session cookie is sealed with them)"
        )
    scopes = login.scopes if "openid" in login.scopes else ("openid", *login.scopes)
    return replace(
        login,
        client_secret=client_secret,
        private_key=private_key,
        verifier=verifier,
        scopes=scopes,
        issuer=issuer.url if issuer is not None else login.issuer,
    )


def _verifier(b: Builder, raw: dict[str, Any]) -> LoginVerifierConfig:
    where: tuple[PathPart, ...] = (*_WHERE, "verifier")
    verifier = fill(b, LoginVerifierConfig, raw, where)
    if "algorithms" in raw:
        verifier = replace(verifier, algorithms=checked_algorithms(b, raw["algorithms"], where))
    for key in ("url", "jwks_uri"):
        b.url(raw[key], (*where, key), insecure_ok=verifier.allow_insecure_http)
    if "?" in verifier.url:
        b.doc.problem((*where, "url"), "must not contain a query (the gateway adds its own)")
    return verifier


def _check_prefix(b: Builder, prefix: str, resource: str) -> None:
    mcp_path = urlsplit(resource).path or "/"
    where = (*_WHERE, "path_prefix")
    if prefix == "/.well-known" or prefix.startswith("/.well-known/"):
        b.doc.problem(where, "must not be under /.well-known")
    elif mcp_path == prefix or mcp_path.startswith(prefix + "/"):
        b.doc.problem(where, f"must not be the MCP path ({mcp_path}) or above it")
