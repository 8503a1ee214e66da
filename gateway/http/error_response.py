"""The one renderer of the status table (``docs/errors.md``): GatewayError -> HTTP response.

Every rejection the front door sends goes through :func:`render_error`; nothing else in the
gateway builds an error response. The rules, per row class attribute:

- HTTP status: ``err.status_for(err.era)`` (legacy JSON-RPC rows answer 200, digest §6 item 10).
- Body: a JSON-RPC error object (``id`` = the request's id or ``null``, JSON-RPC 2.0 §5) when the
  row has a ``jsonrpc_code``, or a ``body_code`` (the 401/403, 429, 415 and fixed 400 rows: the
  Python SDK and FastMCP surface a non-2xx body only when it is a JSON-RPC error). ``message``
  is the row's ``body_message()`` and ``data`` its ``body_data()``: ``-32022``
  (``supported``/``requested``, schema ``UnsupportedProtocolVersionError``), ``-32021``
  (``requiredCapabilities``), 401/403
  (``required_scopes``, and ``missing_scopes`` on 403). Other rows get a short fixed JSON object
  ``{"error": ..., "error_description": ...}`` (RFC 6750 §3 member names), or no body at all
  when the row's message is empty (405, 403 origin).
- Headers: ``Cache-Control: no-store`` always; ``WWW-Authenticate`` when the caller passes the
  challenge built by the authenticator; ``Retry-After`` (RFC 9110 §10.2.3) when set; ``Allow: POST``
  on 405 (RFC 9110 §15.5.6); ``Accept-Encoding: identity`` on 415 for a content-coded body
  (RFC 7694 §3); ``DPoP-Nonce`` on ``use_dpop_nonce`` (RFC 9449 §9).

Texts are the row's fixed ``message``, extended only with scope names from the policy or
capability names from a fixed list; nothing from the request is ever echoed except the JSON-RPC
id and, for ``-32022``, the requested version (both already validated by the decoder).
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

from gateway.errors import (
    GatewayError,
    InternalError,
    InvalidToken,
    MethodNotAllowed,
    NoCredentials,
    UnsupportedContentEncoding,
    UseDpopNonce,
)
from gateway.jsonkit.write import compact_ascii
from gateway.observability.logging import get_logger
from gateway.protocol.envelope import error_body

__all__ = ["JSON_CONTENT_TYPE", "NO_STORE", "internal_error", "render_error"]

JSON_CONTENT_TYPE: Final = "application/json"
NO_STORE: Final = "no-store"

_log = get_logger("gateway.http")


def render_error(err: GatewayError, *, challenge: str | None) -> web.Response:
    """Build the response for one status-table row.

    ``challenge`` is the ``WWW-Authenticate`` value from ``Authenticator.challenge(err)``; the
    renderer never builds a challenge itself (one helper escapes them, RFC 6750 §3).
    """
    headers: dict[str, str] = {"Cache-Control": NO_STORE}
    if challenge is not None:
        headers["WWW-Authenticate"] = challenge
    if err.retry_after is not None:
        headers["Retry-After"] = str(max(1, int(err.retry_after)))
    if isinstance(err, MethodNotAllowed):
        headers["Allow"] = "POST"
    elif isinstance(err, UnsupportedContentEncoding):
        headers["Accept-Encoding"] = "identity"  # RFC 7694 §3
    elif isinstance(err, UseDpopNonce) and err.nonce:
        headers["DPoP-Nonce"] = err.nonce  # RFC 9449 §9
    status = err.status_for(err.era)
    code = err.wire_code
    if code is not None:
        body = _auth_body(err, code) if err.request_id is None else None
        if body is None:
            body = error_body(err.request_id, code, err.body_message(), err.body_data())
    elif err.message:
        body = _fixed_body(err)
    else:
        return web.Response(status=status, headers=headers)
    headers["Content-Type"] = JSON_CONTENT_TYPE
    return web.Response(status=status, body=body, headers=headers)


_AUTH_BODIES: dict[tuple[type[GatewayError], tuple[str, ...]], bytes] = {}
"""401 bodies by row and scopes (the policy's baseline, never input): a client retrying a
refused token gets the same bytes each time. Cleared when full (baselines of old policies)."""

_MAX_AUTH_BODIES: Final = 16


def _auth_body(err: GatewayError, code: int) -> bytes | None:
    """The rendered body of a 401 without a JSON-RPC id (answered before the body is read)."""
    kind = type(err)
    if kind is not InvalidToken and kind is not NoCredentials:
        return None
    key = (kind, err.scopes)
    body = _AUTH_BODIES.get(key)
    if body is None:
        if len(_AUTH_BODIES) >= _MAX_AUTH_BODIES:
            _AUTH_BODIES.clear()
        body = _AUTH_BODIES[key] = error_body(None, code, err.body_message(), err.body_data())
    return body


def _fixed_body(err: GatewayError) -> bytes:
    # RFC 6750 §3 names: "error" is the OAuth code when the row has one, else the row name.
    return compact_ascii({"error": err.oauth_error or err.row, "error_description": err.message})


def internal_error(exc: BaseException, *, request_id: str | None = None) -> InternalError:
    """Turn an unexpected exception into the ``internal_error`` row, logging it (never shown).

    The exception text stays in the log line (with its traceback); the client sees only the
    fixed message, so no internal detail or secret can leak through an error body.
    """
    _log.error("unhandled_pipeline_error", request_id=request_id, exc_info=exc)
    return InternalError()
