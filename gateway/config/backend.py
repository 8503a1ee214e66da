"""The backends: one ``backend:`` section, or ``backends:`` (name -> the same settings plus
``prefix``): each upstream MCP server, its service credential and its TLS.

Load-time checks a schema cannot express: backend names, and prefixes under which a name
collision is possible for *any* tool names the upstreams may later offer (the tools themselves
are only known at runtime, where :mod:`gateway.backend.federation` hides what still collides).
Two exposed names ``p1 + t1`` and ``p2 + t2`` can only be equal when one prefix starts with the
other; so two equal prefixes, or a non-empty prefix that starts with another non-empty one, are
problems. The empty prefix (at most one backend) starts every other prefix; it is allowed, and
its tools that fall inside another backend's prefix are hidden at runtime.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Final

from gateway.config.backend_model import (
    DEFAULT_BACKEND,
    BackendConfig,
    CredentialConfig,
    TlsConfig,
)
from gateway.config.builder import Builder
from gateway.config.declare import declared_default, fill
from gateway.config.identity import build_identity, check_assertion_key_ids
from gateway.config.issuer_model import CLIENT_AUTHS, IssuerConfig
from gateway.yaml_source import PathPart

__all__ = [
    "BACKEND_NAME",
    "MAX_BACKENDS",
    "RESERVED_AUTHORIZE_PARAMS",
    "build_backend",
    "build_backends",
    "build_credential",
    "build_tls",
    "check_token_exchange",
    "check_user_oauth",
    "default_prefix",
]

BACKEND_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
"""A ``backends:`` key: a bounded label of metrics, logs and the audit trail."""
MAX_BACKENDS: Final = 32
"""Backends one gateway fronts (each has its own pool, catalog and label values)."""


_NO_PREFIX: Final = declared_default(BackendConfig, "name_prefix")
"""``backend.name_prefix`` when not written: tools keep their names."""


def default_prefix(name: str) -> str:
    """``backends.<name>.prefix`` when not set: the name and two underscores."""
    return f"{name}__"


def build_backends(b: Builder, raw: dict[str, Any], *, dev_http: bool) -> tuple[BackendConfig, ...]:
    """Every backend in file order: the one ``backend:`` (named ``default``, its
    ``name_prefix`` as prefix) or each entry of ``backends:``. Exactly one of the two."""
    if "backend" in raw and "backends" in raw:
        b.doc.problem(
            ("backends",),
            "backend: and backends: are exclusive (backend: is one unnamed backend; "
            "move it under backends: with a name)",
        )
        return ()
    if "backend" in raw:
        return (build_backend(b, raw["backend"], dev_http=dev_http),)
    entries = raw.get("backends")
    if entries is None:
        b.doc.problem((), "one of backend: or backends: is required")
        return ()
    backends: list[BackendConfig] = []
    for name, rb in entries.items():
        where: tuple[PathPart, ...] = ("backends", name)
        if not BACKEND_NAME.fullmatch(name):
            b.doc.problem(
                where,
                "a backend name is 1-32 characters of a-z, 0-9, '_' and '-', starting with a "
                "letter or digit",
            )
        prefix = rb.get("prefix", default_prefix(name))
        backends.append(
            build_backend(b, rb, dev_http=dev_http, where=where, name=name, prefix=prefix)
        )
    _check_prefixes(b, raw["backends"], backends)
    check_assertion_key_ids(b, [(("backends", c.name), c.identity) for c in backends])
    return tuple(backends)


def _check_prefixes(b: Builder, entries: dict[str, Any], backends: list[BackendConfig]) -> None:
    def at(backend: BackendConfig) -> tuple[PathPart, ...]:
        explicit = "prefix" in entries[backend.name]
        return ("backends", backend.name, *(("prefix",) if explicit else ()))

    for index, later in enumerate(backends):
        for earlier in backends[:index]:
            p1, p2 = earlier.name_prefix, later.name_prefix
            if p1 == p2:
                b.doc.problem(
                    at(later),
                    f"prefix {p2!r} is also the prefix of backend {earlier.name!r}: a tool "
                    "offered by both would have one exposed name (give each backend its own "
                    "prefix; only one may have the empty prefix)",
                )
            elif p1 and p2 and (p1.startswith(p2) or p2.startswith(p1)):
                short, long = (earlier, later) if p2.startswith(p1) else (later, earlier)
                rest = long.name_prefix[len(short.name_prefix) :]
                b.doc.problem(
                    at(later),
                    f"prefix {long.name_prefix!r} of backend {long.name!r} starts with prefix "
                    f"{short.name_prefix!r} of backend {short.name!r}: a tool {rest + 'x'!r} of "
                    f"{short.name!r} and a tool 'x' of {long.name!r} would have one exposed name "
                    "(choose prefixes that do not start with one another)",
                )
        if later.name_prefix:
            for tool, _ in later.tool_timeouts_s:
                if not tool.startswith(later.name_prefix):
                    b.doc.problem(
                        ("backends", later.name, "tool_timeouts_s", tool),
                        f"never matches: tool names are as clients see them, with this "
                        f"backend's prefix {later.name_prefix!r}",
                    )


def build_backend(
    b: Builder,
    rb: dict[str, Any],
    *,
    dev_http: bool,
    where: tuple[PathPart, ...] = ("backend",),
    name: str = DEFAULT_BACKEND,
    prefix: str | None = None,
) -> BackendConfig:
    """One backend's settings at ``where``; ``prefix`` None: the ``backend:`` section's own
    ``name_prefix``. ``dev_http``: plain http is allowed for a loopback credential token
    endpoint."""
    bp = where
    # The declared keys first; the checked parts below, in the order their problems are reported.
    backend = fill(
        b,
        BackendConfig,
        rb,
        bp,
        leave=("tls", "identity"),
        credential=None,
        name=name,
        name_prefix=prefix if prefix is not None else rb.get("name_prefix", _NO_PREFIX),
    )
    b.url(rb["url"], (*bp, "url"), insecure_ok=backend.allow_insecure_http, private_ok=True)
    return replace(
        backend,
        credential=build_credential(b, rb["credential"], (*bp, "credential"), dev_http=dev_http),
        tls=build_tls(b, rb.get("tls", {}), (*bp, "tls")),
        identity=build_identity(
            b, rb.get("identity", {}), (*bp, "identity"), backend_url=rb["url"]
        ),
    )


def build_credential(
    b: Builder, rcred: dict[str, Any], cp: tuple[PathPart, ...], *, dev_http: bool
) -> CredentialConfig:
    doc = b.doc
    if rcred["type"] == "bearer":
        return CredentialConfig(type="bearer", token=b.secret(rcred["token"], (*cp, "token")))
    kind = rcred["type"]
    cc_auth = rcred.get("client_auth", declared_default(CredentialConfig, "client_auth"))
    # check's guarded pass runs here on credentials the schema refused (and reported) already:
    # an unknown type or client_auth gets no checks that depend on it. A user_oauth client
    # without client_id is the gateway's client metadata document (or registered on demand).
    known = cc_auth in CLIENT_AUTHS and (
        kind in ("client_credentials", "token_exchange")
        or (kind == "user_oauth" and "client_id" in rcred)
    )
    if known and cc_auth == "private_key_jwt" and "private_key" not in rcred:
        doc.problem(cp, "private_key is required with client_auth: private_key_jwt")
    if known and cc_auth != "private_key_jwt" and "client_secret" not in rcred:
        doc.problem(cp, f"client_secret is required with client_auth: {cc_auth}")
    if "token_endpoint" in rcred:
        b.url(rcred["token_endpoint"], (*cp, "token_endpoint"), insecure_ok=dev_http)
    if kind == "user_oauth":
        check_user_oauth(b, rcred, cp, insecure_ok=dev_http)
    if kind == "token_exchange" and "audience" not in rcred and "resource" not in rcred:
        doc.problem(
            cp,
            "token_exchange needs audience or resource (or both): the backend the exchanged "
            "token is for, as the issuer names it",
        )
    return fill(
        b,
        CredentialConfig,
        rcred,
        cp,
        client_secret=b.secret(rcred.get("client_secret"), (*cp, "client_secret")),
        private_key=b.secret(rcred.get("private_key"), (*cp, "private_key")),
        catalog_token=b.secret(rcred.get("catalog_token"), (*cp, "catalog_token")),
    )


RESERVED_AUTHORIZE_PARAMS: Final = frozenset(
    {
        "response_type",
        "client_id",
        "redirect_uri",
        "state",
        "scope",
        "resource",
        "code_challenge",
        "code_challenge_method",
        "prompt",
        "request",
        "request_uri",
    }
)
"""Parameters the gateway sets itself on an authorization request (``prompt`` has its key)."""


def check_user_oauth(
    b: Builder, rcred: dict[str, Any], cp: tuple[PathPart, ...], *, insecure_ok: bool
) -> None:
    """A ``user_oauth`` credential: where its authorization server is, and whose client.

    A pre-registered client belongs to one authorization server (MCP 2026-07-28
    client-registration.mdx §Authorization Server Binding), so it names that server; explicit
    endpoints come in pairs and name the server too (the ``iss`` of its answers, RFC 9207)."""
    doc = b.doc
    for key in ("authorization_server", "authorization_endpoint"):
        if key in rcred:
            b.url(rcred[key], (*cp, key), insecure_ok=insecure_ok)
    if ("authorization_endpoint" in rcred) != ("token_endpoint" in rcred):
        doc.problem(cp, "authorization_endpoint and token_endpoint go together")
    if "authorization_server" not in rcred:
        if "client_id" in rcred:
            doc.problem(
                cp,
                "a pre-registered client_id needs authorization_server: the server it is "
                "registered at (its credentials are used there only)",
            )
        elif "authorization_endpoint" in rcred:
            doc.problem(cp, "explicit endpoints need authorization_server (their issuer)")
    for name in rcred.get("extra_authorize_params") or {}:
        if str(name).lower() in RESERVED_AUTHORIZE_PARAMS:
            doc.problem(
                (*cp, "extra_authorize_params", name),
                "is set by the gateway itself and cannot be configured here",
            )


def build_tls(b: Builder, rtls: dict[str, Any], tp: tuple[PathPart, ...]) -> TlsConfig:
    doc = b.doc
    tls = TlsConfig(**{k: str(b.path(v)) for k, v in rtls.items()})  # relative to the file
    if (tls.client_cert is None) != (tls.client_key is None):
        doc.problem(tp, "client_cert and client_key go together")
    for key, value in rtls.items():
        if not b.path(value).is_file():
            doc.problem((*tp, key), f"file not found: {b.path(value)}")
    return tls


def check_token_exchange(
    b: Builder,
    raw: dict[str, Any],
    backends: tuple[BackendConfig, ...],
    issuers: tuple[IssuerConfig, ...],
    resource: str,
) -> None:
    """What a ``token_exchange`` credential needs from the rest of the file: a named ``issuer``
    that is trusted, an issuer to pick when ``token_endpoint`` is fixed and several are trusted
    (a caller's token goes only to its own issuer), and a target other than this gateway (an
    exchanged token this gateway would accept could be replayed to it by the backend)."""
    own = {resource, *(aud for issuer in issuers for aud in issuer.audiences)}
    urls = {issuer.url for issuer in issuers}
    for settings in backends:
        cred = settings.credential
        if cred.type != "token_exchange":
            continue
        where: tuple[PathPart, ...] = (
            ("backend", "credential")
            if "backend" in raw
            else ("backends", settings.name, "credential")
        )
        if cred.issuer is not None and cred.issuer not in urls:
            b.doc.problem((*where, "issuer"), "is not the url of a configured issuer")
        if cred.token_endpoint is not None and cred.issuer is None and len(issuers) > 1:
            b.doc.problem(
                (*where, "token_endpoint"),
                "with several issuers a fixed token_endpoint needs credential.issuer: the one "
                "issuer whose tokens may be sent there",
            )
        for key in ("audience", "resource"):
            if getattr(cred, key) in own:
                b.doc.problem(
                    (*where, key),
                    "names this gateway itself (resource or an issuer's audiences): the "
                    "exchanged token must be for the backend",
                )
