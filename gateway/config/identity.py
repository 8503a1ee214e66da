"""``backends.<name>.identity`` and ``identity_jwks``: load-time checks of the caller assertions.

What a schema cannot say, each a ``file:line`` problem:

* the assertion header is an HTTP token (the schema's pattern), and not a header that would be
  dangerous or that the gateway already sets: hop-by-hop fields (RFC 9110 §7.6.1), credential
  fields (``Authorization``, ``Proxy-Authorization``, ``Cookie``), the MCP transport headers, the
  framing and trace headers, and the unsigned identity headers;
* the key is an unencrypted PEM *private* key whose type matches ``alg`` (EdDSA: Ed25519/Ed448,
  ES256: EC P-256, RS256: RSA of 2048 bits or more), :mod:`gateway.config.signing_keys`;
* two backends that set the same ``key_id`` sign with the same key (RFC 7517 §4.5: distinct
  keys of one JWK Set have distinct ``kid`` values);
* every ``identity_jwks.publish_keys`` file exists and holds zero or more PEM keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from gateway.config.builder import Builder
from gateway.config.declare import fill
from gateway.config.identity_model import (
    AssertionConfig,
    IdentityConfig,
    IdentityJwksConfig,
)
from gateway.config.secrets import Secret
from gateway.config.signing_keys import KeyProblem, parse_public_keys, parse_signing_key
from gateway.yaml_source import PathPart

__all__ = [
    "RESERVED_HEADERS",
    "build_identity",
    "build_identity_jwks",
    "check_assertion_key_ids",
]

RESERVED_HEADERS: Final = frozenset(
    {
        # RFC 9110 §7.6.1 hop-by-hop fields (and the non-standard ones proxies still honour)
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        # credentials
        "authorization",
        "proxy-authorization",
        "proxy-authenticate",
        "www-authenticate",
        "cookie",
        "set-cookie",
        # framing and routing
        "host",
        "content-length",
        "content-type",
        "content-encoding",
        "accept",
        "accept-encoding",
        "expect",
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-real-ip",
        "origin",
        # set by the gateway on every upstream request (docs/backends.md)
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
        "mcp-session-id",
        "last-event-id",
        "x-request-id",
        "traceparent",
        "tracestate",
        "x-mcp-gateway-subject",
        "x-mcp-gateway-client-id",
    }
)
"""Header names an assertion may not use (compared lowercase); ``Mcp-Param-*`` too."""


def build_identity(
    b: Builder, raw: dict[str, Any], where: tuple[PathPart, ...], *, backend_url: str
) -> IdentityConfig:
    """One backend's ``identity`` section (``where`` is its path)."""
    rassertion = raw.get("assertion")
    if rassertion is None:
        return IdentityConfig()
    ap = (*where, "assertion")
    # The declared keys first; the header and the key are checked below, in this order.
    assertion = fill(
        b,
        AssertionConfig,
        rassertion,
        ap,
        key=None,
        audience=rassertion.get("audience", backend_url),
    )
    lowered = assertion.header.lower()
    if lowered in RESERVED_HEADERS or lowered.startswith("mcp-param-"):
        b.doc.problem(
            (*ap, "header"),
            f"{assertion.header!r} is a header the gateway sets itself, a hop-by-hop or a "
            "credential header; choose a name of your own (default X-MCP-Gateway-Assertion)",
        )
    key = b.secret(rassertion["key"], (*ap, "key"))
    if key is not None and not key.skipped:
        try:
            parse_signing_key(key.reveal(), assertion.alg)
        except KeyProblem as exc:
            b.doc.problem((*ap, "key"), f"the key {exc}")
    # A missing key is a recorded problem: no Config is built from this document.
    return IdentityConfig(
        assertion=replace(assertion, key=key if key is not None else Secret("", "missing"))
    )


def check_assertion_key_ids(
    b: Builder, backends: Sequence[tuple[tuple[PathPart, ...], IdentityConfig]]
) -> None:
    """Two backends that set one ``key_id`` must sign with the same key (``backends``: each
    backend's path and identity, in file order)."""
    seen: dict[str, str] = {}
    for where, identity in backends:
        assertion = identity.assertion
        if assertion is None or assertion.key_id is None:
            continue
        value = assertion.key.reveal()
        if seen.setdefault(assertion.key_id, value) != value:
            b.doc.problem(
                (*where, "identity", "assertion", "key_id"),
                f"key_id {assertion.key_id!r} also names another backend's different key: "
                "one kid names one key (RFC 7517 §4.5)",
            )


def build_identity_jwks(
    b: Builder, raw: dict[str, Any], *, signing: bool = True
) -> IdentityJwksConfig:
    """The top-level ``identity_jwks`` section; ``signing``: some backend has an assertion key
    (without one and without ``publish_keys`` there is no JWK Set to serve: a warning)."""
    paths: list[Path] = []
    for index, entry in enumerate(raw.get("publish_keys", [])):
        where: tuple[PathPart, ...] = ("identity_jwks", "publish_keys", index, "file")
        path = b.path(entry["file"])
        paths.append(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            b.doc.problem(where, f"cannot read key file {path}")
            continue
        try:
            parse_public_keys(text)
        except KeyProblem as exc:
            b.doc.problem(where, f"the file {exc}")
    if raw and not signing and not paths:
        b.warnings.append(
            f"{b.doc.where(('identity_jwks',))}: identity_jwks: no backend has "
            "identity.assertion and no publish_keys are set: there is no JWK Set to serve"
        )
    return fill(b, IdentityJwksConfig, raw, ("identity_jwks",), publish_keys=tuple(paths))
