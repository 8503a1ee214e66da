"""RFC 6750 §3 ``WWW-Authenticate: Bearer`` challenges, built in exactly one place.

Every challenge the gateway sends goes through :func:`bearer_challenge`. It quotes each value and
refuses characters RFC 6749 does not allow in that parameter (Appendix A.5-A.7 for ``scope``,
``error`` and ``error_description``), so no request data or policy typo can break the header or
inject parameters. :func:`challenge_for` maps a status-table row to its challenge; see
``docs/authentication.md`` for the exact strings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from gateway.errors import (
    GatewayError,
    InsufficientScope,
    InvalidDpopProof,
    InvalidToken,
    IssuerUnavailable,
    NoCredentials,
    TokenInQuery,
)

__all__ = [
    "bearer_challenge",
    "challenge_for",
    "challenge_params",
    "dpop_challenges",
    "is_scope_token",
    "valid_scopes",
]

_SCOPE_TOKEN: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
"""RFC 6749 §3.3 / A.4: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )."""

_ERROR_CODE: Final = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]+")
"""RFC 6749 A.7: error = 1*( %x20-21 / %x23-5B / %x5D-7E ) (also used for error_description)."""

_URI_VALUE: Final = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
"""RFC 9728 §5.1 ``resource_metadata`` is an absolute URI: visible ASCII without ``"`` or ``\\``."""

_PARAMS: Final = {
    "realm": _ERROR_CODE,
    "error": _ERROR_CODE,
    "error_description": _ERROR_CODE,
    "scope": re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*"),
    "resource_metadata": _URI_VALUE,
    "algs": re.compile(r"[A-Za-z0-9_-]+( [A-Za-z0-9_-]+)*"),
}
"""The auth-params we send, each with the character set RFC 6749 / RFC 9728 allow."""


def is_scope_token(value: str) -> bool:
    """True when ``value`` is one RFC 6749 scope-token (safe to put in ``scope="..."``)."""
    return _SCOPE_TOKEN.fullmatch(value) is not None


def valid_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    """The scope tokens of ``scopes`` that may appear in a challenge, first occurrence wins."""
    seen: dict[str, None] = {}
    for scope in scopes:
        if is_scope_token(scope):
            seen.setdefault(scope, None)
    return tuple(seen)


def bearer_challenge(params: Sequence[tuple[str, str]], scheme: str = "Bearer") -> str:
    """Render ``Bearer name="value", ...`` (or another ``scheme``: ``DPoP``, RFC 9449 §7.1);
    raise ValueError for an unknown or unsafe param.

    RFC 6750 §3: each attribute at most once, values as quoted-strings. Because every allowed
    character set excludes ``"`` and ``\\``, quoting never needs escapes.
    """
    names: set[str] = set()
    rendered: list[str] = []
    for name, value in params:
        pattern = _PARAMS.get(name)
        if pattern is None:
            raise ValueError("unknown Bearer challenge parameter")
        if name in names:
            raise ValueError("a Bearer challenge parameter may appear only once")
        if pattern.fullmatch(value) is None:
            raise ValueError("value has characters RFC 6749 does not allow in this parameter")
        names.add(name)
        rendered.append(name + '="' + value + '"')
    return scheme + " " + ", ".join(rendered) if rendered else scheme


def challenge_for(
    error: GatewayError, *, resource_metadata: str, baseline: Sequence[str]
) -> str | None:
    """The ``WWW-Authenticate`` value for a status-table row, or None when it has none
    (the parameters of :func:`challenge_params` under ``Bearer``)."""
    params = challenge_params(error, resource_metadata=resource_metadata, baseline=baseline)
    return None if params is None else bearer_challenge(params)


def dpop_challenges(
    error: GatewayError,
    *,
    resource_metadata: str,
    baseline: Sequence[str],
    algs: Sequence[str],
    bearer: bool,
) -> str | None:
    """RFC 9449 §7.1: ``DPoP algs="...", <the row's parameters>``, after the row's ``Bearer``
    challenge when bearer tokens are accepted too (one field value, RFC 9110 §11.6.1).

    A DPoP proof row (``invalid_dpop_proof``, ``use_dpop_nonce``) names its error on the
    ``DPoP`` challenge only; the ``Bearer`` one then only points at the metadata."""
    params = challenge_params(error, resource_metadata=resource_metadata, baseline=baseline)
    if params is None:
        return None
    dpop = bearer_challenge([("algs", " ".join(algs)), *params], scheme="DPoP")
    if not bearer:
        return dpop
    if isinstance(error, InvalidDpopProof):
        params = [(k, v) for k, v in params if k not in ("error", "error_description")]
    return bearer_challenge(params) + ", " + dpop


def challenge_params(
    error: GatewayError, *, resource_metadata: str, baseline: Sequence[str]
) -> list[tuple[str, str]] | None:
    """The challenge parameters for a status-table row, or None when it has none.

    - NoCredentials (401): ``resource_metadata`` and the baseline ``scope``; no ``error``
      (RFC 6750 §3.1: a request without credentials gets no error code).
    - InvalidToken (401): ``error="invalid_token"`` (a DPoP proof row: ``invalid_dpop_proof``
      or ``use_dpop_nonce``, RFC 9449 §7.1, §9) plus the above.
    - TokenInQuery (400): ``error="invalid_request"`` plus ``resource_metadata``.
    - InsufficientScope / ToolInsufficientScope (403): ``error="insufficient_scope"`` and every
      scope the operation needs (``error.scopes``), plus ``resource_metadata``.
    - IssuerUnavailable (503): no ``error`` (RFC 6750 defines no "temporarily unavailable" code
      for resource servers), only ``resource_metadata``; the 503 status and ``Retry-After``
      carry the "retry later" meaning.
    Scopes that are not valid RFC 6749 scope-tokens are left out rather than breaking the header.
    """
    params: list[tuple[str, str]] = []
    if isinstance(error, InsufficientScope):
        params.append(("error", "insufficient_scope"))
        params.append(("error_description", error.message))
        scopes = valid_scopes(error.scopes)
        if scopes:
            params.append(("scope", " ".join(scopes)))
        params.append(("resource_metadata", resource_metadata))
        return params
    if isinstance(error, InvalidToken | NoCredentials):
        if isinstance(error, InvalidToken):
            # invalid_token, or a DPoP proof row's invalid_dpop_proof / use_dpop_nonce.
            params.append(("error", error.oauth_error or "invalid_token"))
            params.append(("error_description", error.message))
        params.append(("resource_metadata", resource_metadata))
        scopes = valid_scopes(baseline)
        if scopes:
            params.append(("scope", " ".join(scopes)))
        return params
    if isinstance(error, TokenInQuery):
        params.append(("error", "invalid_request"))
        params.append(("error_description", error.message))
        params.append(("resource_metadata", resource_metadata))
        return params
    if isinstance(error, IssuerUnavailable):
        return [("resource_metadata", resource_metadata)]
    return None
