"""RFC 8259 strict JSON decoding for request bodies (MCP transports/index.mdx: UTF-8 only).

:func:`decode` turns a request body into Python values or refuses it. It is the only JSON parser
that sees client bytes, so every parser-differential trick (duplicate keys, escaped duplicate
keys, lone surrogates, non-finite numbers, trailing data) is closed here, before the body can
influence routing, policy or the canonical request built for the backend.

The reading is :func:`gateway.jsonkit.loads`, the one strict reader of every layer; this module
maps its refusals to the status table:

* :class:`~gateway.errors.ParseError` (``-32700``): the body is not one well-formed UTF-8 JSON
  text: a byte order mark (RFC 8259 §8.1: accepting one would make the gateway accept bytes a
  strict backend refuses), invalid UTF-8 (overlong forms, encoded surrogates, truncated
  sequences), a syntax error, trailing data after the value, ``NaN``/``Infinity``, a duplicate
  object key (compared after unescaping, so ``"a"`` and ``"\\u0061"`` collide), or a ``\\uD800``
  style escape that leaves a lone surrogate (RFC 8259 §8.2: such strings are not interoperable
  and cannot be re-encoded as UTF-8 for the backend).
* :class:`~gateway.errors.InvalidRequest` (``-32600``): the JSON is well formed but exceeds a
  cap of :class:`~gateway.config.JsonLimits` (nesting depth, members per object, array length,
  string size in UTF-8 bytes, number token length) or holds a number outside the double range.
  A cap is a policy of this server, not a syntax error, so the request is "invalid", not
  "unparseable"; a body nested beyond the cap is refused this way even if it is also malformed
  further on.

No input is ever echoed: each error carries a fixed message; ``detail`` (logs only) names the
rule that fired, never the offending bytes.
"""

from __future__ import annotations

from typing import Any

from gateway.config import JsonLimits
from gateway.errors import InvalidRequest, ParseError
from gateway.jsonkit.read import JsonError, loads

__all__ = ["decode"]


def decode(body: bytes, limits: JsonLimits) -> Any:
    """Decode one strict JSON text from ``body`` (:func:`gateway.jsonkit.loads`).

    Returns dicts, lists, str, int, float, bool and None. Raises ``ParseError`` or
    ``InvalidRequest`` (see the module docstring); never any other exception.
    """
    try:
        return loads(body, limits)
    except JsonError as exc:
        if exc.kind == "limit":
            raise InvalidRequest(detail=exc.reason) from None
        raise ParseError(detail=exc.reason) from None
