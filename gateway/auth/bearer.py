"""RFC 6750 §2.1 bearer token extraction: the ``Authorization`` request header, nothing else.

Refusals, first failure wins:

1. an ``access_token`` query parameter (RFC 6750 §2.3; MCP forbids tokens in the URI) -> 400
   ``invalid_request`` (:class:`~gateway.errors.TokenInQuery`), even when a header is present too;
2. more than one ``Authorization`` header (RFC 6750 §3.1 "uses more than one method" / "repeats
   the same parameter") -> 400 ``invalid_request`` (:class:`~gateway.errors.TokenInQuery`);
3. no header, an empty one, or a scheme other than ``Bearer`` (or ``DPoP``, RFC 9449 §7.1, when
   an issuer accepts DPoP-bound tokens) -> 401 without an error code
   (:class:`~gateway.errors.NoCredentials`, RFC 6750 §3.1);
4. ``Bearer`` followed by something that is not one RFC 7235 token68, or a token longer than
   :data:`MAX_TOKEN_BYTES` (or the largest ``issuer.max_token_bytes``) -> 401 ``invalid_token``
   (:class:`~gateway.errors.InvalidToken`; RFC 6750 §3.1 names "malformed" tokens under
   invalid_token).

Tokens are never read from bodies, cookies or other headers.
"""

from __future__ import annotations

import re
from typing import Final

from gateway.errors import InvalidToken, NoCredentials, TokenInQuery
from gateway.seams import AuthRequest

__all__ = ["MAX_TOKEN_BYTES", "extract_bearer", "extract_credentials"]

MAX_TOKEN_BYTES: Final = 8192
"""Longest accepted token by default (8 KiB); longer is answered 401 invalid_token without any
issuer call. An issuer's ``max_token_bytes`` may raise the cap (up to 16000) or lower its own."""

_TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
"""RFC 7235 §2.1 / RFC 6750 §2.1 b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" /
"/" ) *"="."""


def extract_bearer(request: AuthRequest, *, max_bytes: int = MAX_TOKEN_BYTES) -> str:
    """Return the bearer token of ``request`` or raise the row named in the module docstring.

    ``max_bytes``: the longest token accepted (the largest ``max_token_bytes`` of the trusted
    issuers, at least :data:`MAX_TOKEN_BYTES`)."""
    return extract_credentials(request, max_bytes=max_bytes)[1]


def extract_credentials(
    request: AuthRequest, *, max_bytes: int = MAX_TOKEN_BYTES, dpop: bool = False
) -> tuple[bool, str]:
    """(DPoP scheme?, token): as :func:`extract_bearer`, and with ``dpop`` the ``DPoP`` scheme
    (RFC 9449 §7.1) is a credential too, with the same token68 syntax and size rules."""
    if "access_token" in request.query_keys:
        raise TokenInQuery(detail="access_token in the query string")
    headers = request.authorization
    if len(headers) > 1:
        raise TokenInQuery(detail="several Authorization headers")
    if not headers:
        raise NoCredentials(detail="no Authorization header")
    # RFC 9110 §5.5: surrounding whitespace is not part of a field value.
    value = headers[0].strip(" \t")
    scheme, _, rest = value.partition(" ")
    # RFC 9110 §11.1: the auth-scheme is case-insensitive.
    scheme = scheme.lower()
    is_dpop = dpop and scheme == "dpop"
    if scheme != "bearer" and not is_dpop:
        raise NoCredentials(detail="no bearer credentials")
    token = rest.lstrip(" ")
    if not token:
        raise InvalidToken(detail="empty bearer token")
    if len(token) > max_bytes:
        raise InvalidToken(detail="bearer token too long")
    if _TOKEN68.fullmatch(token) is None:
        raise InvalidToken(detail="bearer token is not token68")
    return is_dpop, token
