"""The one strict JSON reader, for every layer (imports nothing from the gateway).

:func:`loads` turns bytes (or text) into Python values or raises :class:`JsonError`; it reads
client request bodies (through ``protocol/jsonstrict.py``, which maps the error to the status
table), every answer of a peer (issuer metadata, introspection, JWK Sets, token endpoints, the
external decision point, MCP backends) and the files the gateway reads. Refused:

* a byte order mark (RFC 8259 §8.1 forbids it in networked JSON) and bytes that are not UTF-8
  (overlong forms, encoded surrogates, truncation; the UTF-16/32 detection of ``json.loads``
  is not wanted either);
* a syntax error or trailing data, ``NaN``/``Infinity`` (Python extensions, not JSON: RFC 8259
  §6), a number that overflows the double range (a NaN or infinite ``exp`` passes every
  comparison);
* a duplicate member name, compared after unescaping (RFC 8259 §4: ``{"decision": false,
  "decision": true}`` must not be read one way here and another way by a proxy or a logger;
  :func:`_without_duplicates` says how that is decided without a Python call per object);
* a ``\\uD800``-style escape that leaves a lone surrogate (RFC 8259 §8.2: not interoperable, and
  not re-encodable as UTF-8);
* what exceeds a cap of :class:`JsonLimits` or ``max_bytes``.

:func:`answer` reads a peer's answer: its media type must be JSON (``application/json`` or a
``+json`` type, RFC 6839 §3.1), and it must be one object. No input is ever echoed: a
:class:`JsonError` carries a fixed reason.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal, NoReturn

import orjson

__all__ = [
    "PEER",
    "UNBOUNDED",
    "UTF8_BOM",
    "JsonError",
    "JsonLimits",
    "answer",
    "is_json",
    "loads",
    "loads_object",
    "media_type",
    "peer_limits",
]

UTF8_BOM: Final = b"\xef\xbb\xbf"

ErrorKind = Literal["syntax", "limit", "content_type"]


class JsonError(ValueError):
    """Not one acceptable JSON text. ``reason`` is fixed text, safe for logs."""

    def __init__(self, reason: str, kind: ErrorKind = "syntax") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind: ErrorKind = kind
        """``syntax``: not well-formed strict JSON; ``limit``: well formed, but over a cap of
        this server; ``content_type``: the peer did not say JSON."""


@dataclass(frozen=True, slots=True)
class JsonLimits:
    """Caps of one reading (:data:`UNBOUNDED`: none; the body's byte cap still bounds the work).

    The defaults are the caps of a client's request body (``limits.json``: docs/protocol.md
    says why these numbers). Depth counts the outermost container as 1."""

    max_depth: int = 32
    max_members: int = 256
    max_array_length: int = 1024
    max_string_bytes: int = 65_536
    max_number_chars: int = 32


UNBOUNDED: Final = sys.maxsize
"""No cap: nothing is counted or checked for it."""
PEER: Final = JsonLimits(
    max_depth=16,
    max_members=UNBOUNDED,
    max_array_length=UNBOUNDED,
    max_string_bytes=UNBOUNDED,
    max_number_chars=UNBOUNDED,
)
"""A peer's answer: bounded by its byte cap (the outbound request's ``max_body``) and a depth."""


@lru_cache(maxsize=16)
def peer_limits(max_depth: int) -> JsonLimits:
    """:data:`PEER` with another depth cap (:data:`UNBOUNDED`: the interpreter's recursion
    limit is the only one)."""
    return dataclasses.replace(PEER, max_depth=max_depth)


def loads(data: bytes | str, limits: JsonLimits = PEER, *, max_bytes: int = UNBOUNDED) -> Any:
    """One strict JSON text (module docstring): dicts, lists, str, int, float, bool, None."""
    if isinstance(data, str):
        text = data
        # A decoded string is never longer in UTF-8 than four bytes per character.
        size = len(text) * 4
        if max_bytes != UNBOUNDED and len(text.encode("utf-8", "surrogatepass")) > max_bytes:
            raise JsonError("document over size limit", "limit")
    else:
        size = len(data)
        if size > max_bytes:
            raise JsonError("document over size limit", "limit")
        if data.startswith(UTF8_BOM):
            raise JsonError("byte order mark")
        try:
            # The strict codec refuses overlong forms, encoded surrogates (ED A0 80), truncation.
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise JsonError("invalid UTF-8") from None
    value = _without_duplicates(text, limits)
    if value is _NOT_DECIDED:
        value = _strict(text, limits)
    _check_tree(value, text, size, limits)
    return value


_NOT_DECIDED: Final[Any] = object()


def _without_duplicates(text: str, limits: JsonLimits) -> Any:
    """The value of ``text`` read without the per-object hook of the strict decoder, when a
    count proves that the strict decoder would have read the same value; otherwise (and on
    any error: the strict decoder then decides, and says why) :data:`_NOT_DECIDED`.

    Why the count proves it. Every ``:`` of a JSON text is either the separator of one
    member or a character inside a string. Without a ``\\u003a`` escape (the only escape
    that decodes to a colon), each string holds as many colons decoded as written. So the
    text's colons are (members written) + (colons in every string written). Read without the
    hook, an object keeps one member per distinct name (the last value); its strings are some
    of the strings written. orjson writes that value back with one ``:`` per member kept and
    the strings' colons as they are (no escape of its makes or hides a colon), so its colons
    are (members kept) + (colons in the strings kept). Without a duplicate name the members
    and the strings kept are all of them and the counts are equal; with one, at least one
    member and its value are gone, and orjson's count is smaller. Equal counts: no duplicate,
    and no object over ``max_members`` either when the text has no more colons than that.
    Everything else (the float, int and constant hooks, strictness) is the strict decoder's
    own. A value orjson does not write (an integer over 64 bits, a lone surrogate, nesting
    over 255) goes to the strict decoder."""
    colons = text.count(":")
    if colons > limits.max_members:
        return _NOT_DECIDED
    if "\\" in text and _COLON_ESCAPE.search(text) is not None:
        return _NOT_DECIDED
    try:
        value = _plain_decoder(limits).decode(text)
        if colons and orjson.dumps(value).count(b":") != colons:
            return _NOT_DECIDED
    except (ValueError, TypeError, RecursionError):  # JsonError, JSONDecodeError, orjson's
        return _NOT_DECIDED
    return value


_COLON_ESCAPE: Final = re.compile(r"\\u003[aA]")
"""The escape of ``:`` (an escaped backslash before ``u003a`` matches too: the slow way)."""


def _strict(text: str, limits: JsonLimits) -> Any:
    try:
        return _decoder(limits).decode(text)
    except JsonError:
        raise
    except RecursionError:
        # The C scanner recurses once per container; a depth bomb stops at the interpreter's
        # recursion limit long before any stack trouble, and is over any depth cap.
        raise JsonError("nesting depth over limit", "limit") from None
    except ValueError:  # json.JSONDecodeError: syntax, trailing data, a BOM in text
        raise JsonError("malformed JSON") from None


def loads_object(
    data: bytes | str, limits: JsonLimits = PEER, *, max_bytes: int = UNBOUNDED
) -> dict[str, Any]:
    """:func:`loads`, and the value must be a JSON object."""
    value = loads(data, limits, max_bytes=max_bytes)
    if not isinstance(value, dict):
        raise JsonError("not a JSON object")
    return value


def media_type(content_type: str) -> str:
    """The media type of a ``Content-Type`` value: parameters dropped, lower case."""
    return content_type.split(";", 1)[0].strip().lower()


def is_json(content_type: str) -> bool:
    """``application/json`` or a ``+json`` structured syntax suffix (RFC 6839 §3.1), e.g.
    ``application/jwk-set+json`` or ``application/problem+json``."""
    kind = media_type(content_type)
    if kind == "application/json":
        return True
    return kind.startswith("application/") and kind.endswith("+json")


def answer(content_type: str, body: bytes, limits: JsonLimits = PEER) -> dict[str, Any]:
    """A peer's answer: said to be JSON by its ``Content-Type``, one strict JSON object."""
    if not is_json(content_type):
        raise JsonError("not a JSON content type", "content_type")
    return loads_object(body, limits)


@lru_cache(maxsize=16)
def _plain_decoder(limits: JsonLimits) -> json.JSONDecoder:
    """:func:`_decoder` without its object hook (:func:`_without_duplicates`)."""
    strict = _decoder(limits)
    return json.JSONDecoder(
        parse_float=strict.parse_float,
        parse_int=None if limits.max_number_chars == UNBOUNDED else strict.parse_int,
        parse_constant=_refuse_constant,
        strict=True,
    )


@lru_cache(maxsize=16)
def _decoder(limits: JsonLimits) -> json.JSONDecoder:
    """One decoder per limit set; hooks run inside the C scanner, so they see every value.
    A cap of :data:`UNBOUNDED` costs nothing per value (its hook does not compare)."""
    max_members = limits.max_members
    max_number = limits.max_number_chars

    def unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        # Keys arrive unescaped, so "a" and "\u0061" are the same key here. A later-wins or
        # first-wins reader would disagree with another parser about which value counts.
        if len(obj) != len(pairs):
            raise JsonError("duplicate object key")
        return obj

    def capped_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        count = len(pairs)
        if count > max_members:
            raise JsonError("object members over limit", "limit")
        obj = dict(pairs)
        if len(obj) != count:
            raise JsonError("duplicate object key")
        return obj

    isinf = math.isinf  # a closure variable: the cheapest check per float token

    def finite(token: str) -> float:
        number = float(token)
        if isinf(number):  # only an overflow gets here: NaN/Infinity are refused as constants
            raise JsonError("number out of range", "limit")
        return number

    def capped_float(token: str) -> float:
        if len(token) > max_number:
            raise JsonError("number token over limit", "limit")
        return finite(token)

    def capped_int(token: str) -> int:
        if len(token) > max_number:
            raise JsonError("number token over limit", "limit")
        return int(token)

    return json.JSONDecoder(
        object_pairs_hook=unique_members if max_members == UNBOUNDED else capped_members,
        parse_float=finite if max_number == UNBOUNDED else capped_float,
        # Uncapped, ints are read by the C scanner (Python's own digit cap still holds).
        parse_int=None if max_number == UNBOUNDED else capped_int,
        parse_constant=_refuse_constant,
        strict=True,  # control characters inside strings are a syntax error (RFC 8259 §7)
    )


_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
"""Where no escape of U+D800-U+DFFF is written, no decoded string can hold a lone surrogate."""


def _refuse_constant(_token: str) -> NoReturn:
    raise JsonError("non-finite number literal")


def _check_tree(value: Any, text: str, size: int, limits: JsonLimits) -> None:
    """Depth, array length, string size and lone-surrogate checks, iteratively.

    Each check is skipped when a cheap whole-text count proves it cannot fire, so a typical
    request or answer is never walked: depth cannot exceed the number of opening brackets, an
    array cannot be longer than the number of commas plus one, a decoded string is never
    longer in UTF-8 than the source's ``size`` in bytes, and lone surrogates only come from
    ``\\uD8xx``-``\\uDFxx`` escapes.
    """
    max_depth = limits.max_depth
    max_array = limits.max_array_length
    max_bytes = limits.max_string_bytes
    check_depth = max_depth != UNBOUNDED and text.count("{") + text.count("[") > max_depth
    check_arrays = max_array != UNBOUNDED and text.count(",") + 1 > max_array
    check_size = size > max_bytes
    # "\\" first: one memchr, where a two-character "in" scans slowly when there is no match.
    check_escapes = "\\" in text and _SURROGATE_ESCAPE.search(text) is not None
    if not (check_depth or check_arrays or check_size or check_escapes):
        return
    check_strings = check_size or check_escapes

    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if check_depth and depth > max_depth:
                raise JsonError("nesting depth over limit", "limit")
            for key, item in node.items():
                if check_strings:
                    _check_string(key, max_bytes)
                if isinstance(item, dict | list):
                    stack.append((item, depth + 1))
                elif check_strings and isinstance(item, str):
                    _check_string(item, max_bytes)
        elif isinstance(node, list):
            if check_depth and depth > max_depth:
                raise JsonError("nesting depth over limit", "limit")
            if check_arrays and len(node) > max_array:
                raise JsonError("array length over limit", "limit")
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
            raise JsonError("lone surrogate escape") from None
    if size > max_bytes:
        raise JsonError("string over limit", "limit")
