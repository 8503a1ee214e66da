"""RFC 8259 strict JSON decoding for request bodies (MCP transports/index.mdx: UTF-8 only).

:func:`decode` turns a request body into Python values or refuses it. It is the only JSON parser
that sees client bytes, so every parser-differential trick (duplicate keys, escaped duplicate
keys, lone surrogates, non-finite numbers, trailing data) is closed here, before the body can
influence routing, policy or the canonical request built for the backend.

Refusals:

* :class:`~gateway.errors.ParseError` (``-32700``): the body is not one well-formed UTF-8 JSON
  text: a byte order mark, invalid UTF-8 (overlong forms, encoded surrogates, truncated
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

import json
from functools import lru_cache
from typing import Any, Final, NoReturn

from gateway.config import JsonLimits
from gateway.errors import InvalidRequest, ParseError

__all__ = ["UTF8_BOM", "decode"]

UTF8_BOM: Final = b"\xef\xbb\xbf"
"""Refused: RFC 8259 §8.1 forbids adding a BOM to networked JSON; accepting one would make the
gateway accept bytes a strict backend refuses."""


def decode(body: bytes, limits: JsonLimits) -> Any:
    """Decode one strict JSON text from ``body``.

    Returns dicts, lists, str, int, float, bool and None. Raises ``ParseError`` or
    ``InvalidRequest`` (see the module docstring); never any other exception.
    """
    if body.startswith(UTF8_BOM):
        raise ParseError(detail="byte order mark")
    try:
        # The strict codec refuses overlong forms, encoded surrogates (ED A0 80) and truncation.
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError(detail="invalid UTF-8") from None

    try:
        value = _decoder(limits).decode(text)
    except RecursionError:
        # The C scanner recurses once per container; a depth bomb stops at the interpreter's
        # recursion limit long before any stack trouble and is refused as over the depth cap.
        raise InvalidRequest(detail="nesting depth over limit") from None
    except ValueError:  # json.JSONDecodeError: syntax, trailing data ("Extra data")
        raise ParseError(detail="malformed JSON") from None

    _check_tree(value, text, len(body), limits)
    return value


@lru_cache(maxsize=16)
def _decoder(limits: JsonLimits) -> json.JSONDecoder:
    """One decoder per limit set; hooks run inside the C scanner, so they see every value."""
    max_members = limits.max_members
    max_number = limits.max_number_chars

    def object_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        count = len(pairs)
        if count > max_members:
            raise InvalidRequest(detail="object members over limit")
        obj = dict(pairs)
        # Keys arrive unescaped, so "a" and "\u0061" are the same key here. A later-wins or
        # first-wins reader would disagree with another parser about which value counts.
        if len(obj) != count:
            raise ParseError(detail="duplicate object key")
        return obj

    def parse_int(token: str) -> int:
        if len(token) > max_number:
            raise InvalidRequest(detail="number token over limit")
        return int(token)

    def parse_float(token: str) -> float:
        if len(token) > max_number:
            raise InvalidRequest(detail="number token over limit")
        number = float(token)
        if number in (_INF, -_INF):
            raise InvalidRequest(detail="number out of range")
        return number

    return json.JSONDecoder(
        object_pairs_hook=object_pairs,
        parse_int=parse_int,
        parse_float=parse_float,
        parse_constant=_refuse_constant,
        strict=True,  # control characters inside strings are a syntax error (RFC 8259 §7)
    )


_INF: Final = float("inf")


def _refuse_constant(_token: str) -> NoReturn:
    # NaN, Infinity and -Infinity are Python extensions, not JSON (RFC 8259 §6).
    raise ParseError(detail="non-finite number literal")


def _check_tree(value: Any, text: str, body_len: int, limits: JsonLimits) -> None:
    """Depth, array length, string size and lone-surrogate checks, iteratively.

    Each check is skipped when a cheap whole-text count proves it cannot fire, so the typical
    300-600 byte request is never walked: depth cannot exceed the number of opening brackets,
    an array cannot be longer than the number of commas plus one, a decoded string is never
    longer in UTF-8 than its source bytes, and lone surrogates only come from ``\\u`` escapes.
    """
    max_depth = limits.max_depth
    check_depth = text.count("{") + text.count("[") > max_depth
    check_arrays = text.count(",") + 1 > limits.max_array_length
    check_size = body_len > limits.max_string_bytes
    check_escapes = "\\u" in text
    if not (check_depth or check_arrays or check_size or check_escapes):
        return
    check_strings = check_size or check_escapes
    max_array = limits.max_array_length
    max_bytes = limits.max_string_bytes

    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if check_depth and depth > max_depth:
                raise InvalidRequest(detail="nesting depth over limit")
            for key, item in node.items():
                if check_strings:
                    _check_string(key, max_bytes)
                if isinstance(item, dict | list):
                    stack.append((item, depth + 1))
                elif check_strings and isinstance(item, str):
                    _check_string(item, max_bytes)
        elif isinstance(node, list):
            if check_depth and depth > max_depth:
                raise InvalidRequest(detail="nesting depth over limit")
            if check_arrays and len(node) > max_array:
                raise InvalidRequest(detail="array length over limit")
            for item in node:
                if isinstance(item, dict | list):
                    stack.append((item, depth + 1))
                elif check_strings and isinstance(item, str):
                    _check_string(item, max_bytes)
        elif check_strings and isinstance(node, str):
            _check_string(node, max_bytes)


def _check_string(text: str, max_bytes: int) -> None:
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            # Only a lone \uD800-\uDFFF escape can produce an unencodable str here.
            raise ParseError(detail="lone surrogate escape") from None
    if size > max_bytes:
        raise InvalidRequest(detail="string over limit")
