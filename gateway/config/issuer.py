"""The ``issuer:`` / ``issuers:`` section: the authorization servers whose tokens are accepted.

``issuer:`` (one mapping) is exactly a list of one; ``issuers:`` lists several, each taking every
key of ``issuer:``. Both at once is an error, and so is neither. Entries must name distinct
``url`` values: a JWT is routed to the entry whose ``url`` equals its ``iss`` exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final
from urllib.parse import urlsplit

from gateway.config.builder import Builder
from gateway.config.declare import fill
from gateway.config.issuer_model import (
    CLIENT_AUTHS,
    JWT_ALGORITHMS,
    DpopConfig,
    IssuerConfig,
    ScopeMapEntry,
)
from gateway.config.urls import canonical_uri
from gateway.yaml_source import PathPart, format_path

__all__ = [
    "build_issuers",
    "checked_algorithms",
    "issuer_allows_insecure_http",
    "issuer_entries",
    "scope_map_warnings",
]

_JWT_ONLY_KEYS: Final = (
    "jwks_uri",
    "algorithms",
    "accept_typ",
    "scope_claims",
    "scope_prefix",
    "subject_claim",
    "client_id_claims",
    "jwks_min_refresh_s",
    "jwks_max_refresh_s",
    "jwks_unknown_kid_interval_s",
)
"""Keys that only local JWT validation reads (ignored, with a warning, by ``introspection``)."""
_INTROSPECTION_ONLY_KEYS: Final = (
    "introspection_endpoint",
    "client_id",
    "client_auth",
    "client_secret",
    "private_key",
    "private_key_id",
    "signing_alg",
    "assertion_audience",
    "require_iss",
)


def issuer_entries(raw: dict[str, Any]) -> list[tuple[tuple[PathPart, ...], dict[str, Any]]]:
    """(path, raw mapping) of every configured issuer, in order (``issuer:`` is a list of one)."""
    if "issuer" in raw:
        return [(("issuer",), raw["issuer"])]
    return [(("issuers", index), entry) for index, entry in enumerate(raw.get("issuers", []))]


def issuer_allows_insecure_http(raw: dict[str, Any]) -> bool:
    """An issuer's ``allow_insecure_http`` is the document's development switch: it also permits
    plain http (loopback only) for ``resource`` and the backend credential's token endpoint.
    With several issuers, any one of them setting it is enough (it is a development-only setting;
    ``check`` and the docs say so, and each issuer's own URLs follow only its own switch)."""
    return any(entry.get("allow_insecure_http") is True for _, entry in issuer_entries(raw))


def build_issuers(b: Builder, raw: dict[str, Any]) -> tuple[IssuerConfig, ...]:
    """Every trusted issuer; problems (both/neither section, duplicate urls) go to ``b.doc``."""
    doc = b.doc
    if "issuer" in raw and "issuers" in raw:
        doc.problem(
            ("issuers",), "issuer and issuers are mutually exclusive (issuer: is a list of one)"
        )
    elif "issuer" not in raw and "issuers" not in raw:
        doc.problem((), "one of issuer or issuers is required")
        return ()
    built: list[IssuerConfig] = []
    seen: dict[str, tuple[PathPart, ...]] = {}
    for path, entry in issuer_entries(raw):
        issuer = build_issuer(b, entry, path)
        if issuer.url in seen:
            doc.problem(
                (*path, "url"),
                f"{issuer.url} is already configured at {format_path(seen[issuer.url])}"
                " (tokens are routed by their exact iss)",
            )
        seen.setdefault(issuer.url, path)
        built.append(issuer)
    return tuple(built)


def build_issuer(
    b: Builder, ri: dict[str, Any], ip: tuple[PathPart, ...] = ("issuer",)
) -> IssuerConfig:
    doc = b.doc
    name = format_path(ip)
    # Every key without checks of its own is read as declared; the others are built below, in
    # the order their problems are reported.
    issuer = fill(b, IssuerConfig, ri, ip, leave=_BUILT_HERE)
    dev_http, tokens, client_auth = issuer.allow_insecure_http, issuer.tokens, issuer.client_auth
    # Only a valid mode and client_auth get the checks that depend on them: check's guarded pass
    # also runs here on values the schema refused (and reported) already.
    introspects = tokens in ("introspection", "jwt+introspection")
    b.url(ri["url"], (*ip, "url"), insecure_ok=dev_http)
    for key in ("introspection_endpoint", "token_endpoint", "jwks_uri"):
        if key in ri:
            b.url(ri[key], (*ip, key), insecure_ok=dev_http)
    ignored = {"introspection": _JWT_ONLY_KEYS, "jwt": _INTROSPECTION_ONLY_KEYS}.get(tokens, ())
    for key in ignored:
        if key in ri:
            b.warnings.append(
                f"{doc.where((*ip, key))}: {name}.{key}: not used with tokens: {tokens}"
                " and is ignored"
            )
    client_secret = b.secret(ri.get("client_secret"), (*ip, "client_secret"))
    private_key = b.secret(ri.get("private_key"), (*ip, "private_key"))
    if introspects and client_auth in CLIENT_AUTHS:
        if client_auth == "private_key_jwt":
            if "private_key" not in ri:
                doc.problem(ip, "private_key is required with client_auth: private_key_jwt")
        elif "client_secret" not in ri:
            doc.problem(ip, f"client_secret is required with client_auth: {client_auth}")
    if "assertion_audience" in ri and client_auth != "private_key_jwt" and introspects:
        b.warnings.append(
            f"{doc.where((*ip, 'assertion_audience'))}: {name}.assertion_audience: applies only "
            "to client_auth: private_key_jwt and is ignored"
        )
    if (
        issuer.assertion_audience == "token_endpoint"
        and "introspection_endpoint" in ri
        and "token_endpoint" not in ri
    ):
        # A configured introspection endpoint skips discovery, so nothing would name it.
        doc.problem(
            (*ip, "assertion_audience"),
            f"token_endpoint needs {name}.token_endpoint when introspection_endpoint is "
            "configured (metadata discovery is skipped)",
        )
    algorithms = checked_algorithms(b, ri["algorithms"], ip) if "algorithms" in ri else None
    if issuer.jwks_min_refresh_s > issuer.jwks_max_refresh_s:
        doc.problem(
            (*ip, "jwks_min_refresh_s"),
            f"must not be larger than {name}.jwks_max_refresh_s ({issuer.jwks_max_refresh_s:g})",
        )
    if issuer.scope_map_only and not ri.get("scope_map"):
        doc.problem(
            (*ip, "scope_map_only"),
            "needs a scope_map: without one this issuer's tokens would grant no scope at all",
        )
    built: dict[str, Any] = {
        "client_secret": client_secret,
        "private_key": private_key,
        "algorithms": algorithms,
        # Only URIs are normalised (RFC 8707); plain audience names ("mcp-gateway") stay as is.
        "audiences": tuple(
            canonical_uri(a) if urlsplit(a).netloc else a for a in ri.get("audiences", [])
        ),
        "scope_map": tuple(
            ScopeMapEntry(spelled, scope, doc.where((*ip, "scope_map", spelled)))
            for spelled, scope in ri.get("scope_map", {}).items()
        ),
        "dpop": _dpop(b, ri["dpop"], (*ip, "dpop")) if "dpop" in ri else None,
    }
    # What the file did not write keeps the declared default.
    return replace(issuer, **{key: value for key, value in built.items() if key in ri})


_BUILT_HERE: Final = (
    "client_secret",
    "private_key",
    "algorithms",
    "audiences",
    "scope_map",
    "dpop",
)
"""IssuerConfig keys :func:`build_issuer` builds itself (secrets, checked or normalised)."""


def _dpop(b: Builder, raw: str | dict[str, Any], dp: tuple[PathPart, ...]) -> DpopConfig:
    """``dpop: off | allowed | required``, or the mapping with ``mode`` and the proof rules."""
    if isinstance(raw, str):
        raw = {"mode": raw}
    checked = (
        {"algorithms": checked_algorithms(b, raw["algorithms"], dp)} if "algorithms" in raw else {}
    )
    return fill(b, DpopConfig, raw, dp, **checked)


def scope_map_warnings(
    issuers: tuple[IssuerConfig, ...],
    policy_scopes: frozenset[str],
    baseline: Sequence[str] = (),
) -> list[str]:
    """``check``'s findings about each ``scope_map`` against the policy's scopes (every scope a
    rule, the baseline, a method or the scope hierarchy names):

    - a target the policy never names does nothing (a typo, or a rule that was renamed);
    - a key that is also a policy scope is ambiguous: that issuer's token holding it gets the
      target instead, so a rule naming the key never matches that issuer's callers;
    - with ``scope_map_only``, a ``baseline`` scope no key maps to: that issuer's callers can
      never hold it, so every request of theirs is refused.

    Two keys with one target are fine (a delegated scope and an app role of one meaning)."""
    warnings: list[str] = []
    for index, issuer in enumerate(issuers):
        targets = {entry.scope for entry in issuer.scope_map}
        unreachable = [scope for scope in baseline if scope not in targets]
        if issuer.scope_map_only and issuer.scope_map and unreachable:
            warnings.append(
                f"{issuer.scope_map[0].where}: scope_map: with scope_map_only no key maps to the "
                f"baseline scope {', '.join(unreachable)}, so every request of this issuer's "
                f"callers is refused (issuer {index + 1}, {issuer.url})"
            )
        for entry in issuer.scope_map:
            name = f"scope_map[{entry.spelled!r}]"
            if entry.scope not in policy_scopes:
                warnings.append(
                    f"{entry.where}: {name}: {entry.scope} is named by no policy rule, baseline, "
                    f"method or scope_hierarchy, so the mapping does nothing "
                    f"(issuer {index + 1}, {issuer.url})"
                )
            if entry.spelled in policy_scopes and entry.spelled != entry.scope:
                warnings.append(
                    f"{entry.where}: {name}: {entry.spelled} is also a policy scope: this "
                    f"issuer's tokens holding it get {entry.scope} instead, so a rule naming "
                    f"{entry.spelled} never matches them (issuer {index + 1}, {issuer.url})"
                )
    return warnings


def checked_algorithms(b: Builder, names: list[str], ip: tuple[PathPart, ...]) -> tuple[str, ...]:
    """``algorithms`` at ``ip``: asymmetric JWS algorithms only (each refusal a problem)."""
    for index, alg in enumerate(names):
        where = (*ip, "algorithms", index)
        if alg.lower() == "none" or alg.upper().startswith("HS"):
            # RFC 8725 §3.1/§3.2: an unsigned token, or an HMAC "verified" with a key anyone can
            # fetch from the JWKS (the public key used as the secret), is no proof at all.
            b.doc.problem(where, f"{alg} is refused: only asymmetric signatures are accepted")
        elif alg not in JWT_ALGORITHMS:
            b.doc.problem(where, f"unknown algorithm {alg} (one of {', '.join(JWT_ALGORITHMS)})")
    return tuple(dict.fromkeys(names))
