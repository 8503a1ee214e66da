"""RFC 7662 §2 token introspection client, authenticated as an RFC 6749 §2.3 confidential client.

One call = one form POST of ``token`` and ``token_type_hint=access_token`` with
``Accept: application/json`` through :mod:`gateway.outbound` (deadline ``issuer.timeout_s``,
no redirects, no retries). Client authentication:

- ``client_secret_basic``: ``Authorization: Basic base64(urlenc(id) ":" urlenc(secret))``
  (RFC 6749 §2.3.1 requires the form-urlencoding before base64);
- ``client_secret_post``: ``client_id`` and ``client_secret`` form fields;
- ``private_key_jwt``: an RFC 7523 §2.2 assertion signed with ``issuer.private_key``
  (``iss = sub = client_id``, ``aud`` = the issuer identifier, unique ``jti``, 60 s lifetime),
  built by authlib.

An HTTP 400 whose JSON body is an RFC 6749 §5.2 error naming the token (``invalid_token``,
``unsupported_token_type``, ``invalid_grant``) is the issuer refusing *the token*, not an outage:
node ``oidc-provider`` answers so for id_tokens, for JWT access tokens it does not introspect and
for forged JWTs. It raises :class:`TokenRefused` (the caller answers 401 ``invalid_token`` and
charges the failed-auth budget). Any other failure to get a usable answer (timeout, refused
connection, redirect, another non-200, a non-JSON content type, a body over 16 KiB, not strict
JSON (:mod:`gateway.jsonkit`) or nested deeper than 8, not an object, no boolean ``active``)
raises :class:`IntrospectionFailed`; the caller turns it into 503 + ``Retry-After``, never
401. Both carry the HTTP status and a bounded OAuth ``error`` code for the log line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from joserfc.jwk import ECKey, RSAKey

from gateway.config import IssuerConfig, LoginConfig
from gateway.jsonkit.read import JsonError, answer, is_json, loads_object, peer_limits
from gateway.outbound.client import Outbound
from gateway.outbound.client_auth import (
    ASSERTION_LIFETIME_S,
    ClientAuthentication,
    post_oauth_form,
    signing_key,
)
from gateway.outbound.failures import OutboundError, OutboundFailure

__all__ = [
    "ASSERTION_LIFETIME_S",
    "MAX_DEPTH",
    "MAX_RESPONSE_BYTES",
    "IntrospectionFailed",
    "Introspector",
    "TokenRefused",
    "configured_client_auth",
    "oauth_error_code",
]

MAX_RESPONSE_BYTES: Final = 16_384
"""Largest introspection response read (16 KiB); larger -> issuer failure (503)."""
MAX_DEPTH: Final = 8
"""Deepest JSON nesting accepted in an introspection response."""
_LIMITS: Final = peer_limits(MAX_DEPTH)
_FAILED: Final[dict[OutboundFailure, tuple[str, str]]] = {
    "failed": ("refused", "introspection request failed"),
    "invalid": ("refused", "introspection request failed"),
    "timeout": ("timeout", "introspection timed out"),
    "connection": ("refused", "introspection connection failed"),
    "redirect": ("redirect", "introspection answered a redirect"),
    "too_large": ("oversized", "introspection response too large"),
}
"""An outbound failure's ``introspection_total`` result and its message."""


TOKEN_REFUSALS: Final = frozenset({"invalid_token", "unsupported_token_type", "invalid_grant"})
"""RFC 6749 §5.2 / RFC 6750 §3.1 / RFC 7009 §2.2.1 codes that name the token, not the request."""
_ERROR_CODE: Final = re.compile(r"[a-z_]{1,64}")


def oauth_error_code(body: bytes) -> str | None:
    """The ``error`` member of an OAuth error body, bounded for logs: ``None`` without one,
    ``"other"`` when it is not 1-64 characters of ``[a-z_]`` (never issuer text verbatim)."""
    try:
        doc = loads_object(body, _LIMITS)
    except JsonError:
        return None
    code = doc.get("error")
    if code is None:
        return None
    return code if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else "other"


class IntrospectionFailed(Exception):
    """No usable answer from the issuer. ``result`` is a bounded metric label value."""

    def __init__(
        self, result: str, message: str, *, status: int | None = None, error: str | None = None
    ) -> None:
        super().__init__(message)
        self.result = result
        """timeout | refused | redirect | oversized | http_error | client_auth_rejected |
        content_type | malformed"""
        self.status = status
        """The issuer's HTTP status, when it answered."""
        self.error = error
        """The bounded OAuth ``error`` code of its body (:func:`oauth_error_code`), if any."""


class TokenRefused(Exception):
    """The issuer answered 400 with an error naming the token: the token is not usable."""

    def __init__(self, status: int, error: str) -> None:
        super().__init__("issuer refused the token")
        self.status = status
        self.error = error


def configured_client_auth(
    client_id: str, settings: IssuerConfig | LoginConfig, *, name: str, clock: Callable[[], float]
) -> ClientAuthentication:
    """The gateway's client authentication as the ``name`` section's client settings say
    (``issuers[]`` and ``login`` have the same keys): checked and its key parsed here, once at
    startup (a bad key is a configuration error, not a per-request one); raises ``ValueError``
    with a fixed message."""
    key: RSAKey | ECKey | None = None
    if settings.client_auth == "private_key_jwt":
        if settings.private_key is None:
            raise ValueError(f"{name}.private_key is required with private_key_jwt")
        key = signing_key(
            settings.private_key.reveal(), settings.signing_alg, name=f"{name}.private_key"
        )
    elif settings.client_secret is None:
        raise ValueError(f"{name}.client_secret is required with client_secret_*")
    return ClientAuthentication(
        client_id,
        settings.client_auth,
        clock=clock,
        secret=settings.client_secret,
        key=key,
        alg=settings.signing_alg,
        key_id=settings.private_key_id,
    )


def issuer_client_auth(issuer: IssuerConfig, *, clock: Callable[[], float]) -> ClientAuthentication:
    """The gateway's client authentication at ``issuer`` (introspection)."""
    if issuer.client_id is None:
        raise ValueError("issuer.client_id is required to introspect")
    return configured_client_auth(issuer.client_id, issuer, name="issuer", clock=clock)


class Introspector:
    """One RFC 7662 introspection call per :meth:`introspect`; no retries, no redirects."""

    def __init__(
        self,
        issuer: IssuerConfig,
        outbound: Outbound,
        *,
        destination: str = "issuer",
        clock: Callable[[], float],
    ) -> None:
        self._issuer = issuer
        self._outbound = outbound
        self._destination = destination
        self._auth = issuer_client_auth(issuer, clock=clock)

    async def introspect(self, token: str, endpoint: str, issuer_id: str) -> Mapping[str, Any]:
        """POST ``token`` to ``endpoint``; return the response object or raise
        IntrospectionFailed. ``issuer_id`` is the private_key_jwt audience."""
        form = [("token", token), ("token_type_hint", "access_token")]
        try:
            response = await post_oauth_form(
                self._outbound,
                self._destination,
                endpoint,
                form,
                auth=self._auth,
                audience=issuer_id,
                timeout_s=self._issuer.timeout_s,
                max_body=MAX_RESPONSE_BYTES,
                span="mcp_gateway.introspection",
            )
        except OutboundError as exc:
            raise IntrospectionFailed(*_FAILED[exc.kind]) from exc
        status = response.status
        if status != 200:
            error = oauth_error_code(response.body) if is_json(response.content_type) else None
            if status == 400 and error in TOKEN_REFUSALS:
                raise TokenRefused(status, error)
            if status in (401, 403):
                # RFC 7662 §2.3: the issuer refused *our* credentials: an operator problem.
                raise IntrospectionFailed(
                    "client_auth_rejected",
                    "issuer rejected the gateway's client authentication",
                    status=status,
                    error=error,
                )
            raise IntrospectionFailed(
                "http_error", "introspection answered a non-200 status", status=status, error=error
            )
        try:
            doc = answer(response.content_type, response.body, _LIMITS)
        except JsonError as exc:
            if exc.kind == "content_type":
                raise IntrospectionFailed(
                    "content_type", "introspection answer is not JSON", status=200
                ) from None
            raise IntrospectionFailed(
                "malformed", "introspection answer is malformed", status=200
            ) from exc
        # RFC 7662 §2.2: "active" is REQUIRED; without it the answer is unusable, not a "no".
        if not isinstance(doc.get("active"), bool):
            raise IntrospectionFailed("malformed", "introspection answer lacks active", status=200)
        return doc
