"""Mirrored request headers (MCP 2026-07-28 basic/transports/streamable-http.mdx §Request Metadata).

A modern client repeats parts of the body in headers so intermediaries can route without
parsing JSON: ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-{Name}``.
The body stays the source of truth; this module only decodes header values and compares them
with body values. A value that cannot be decoded is ``None``, which never matches anything, so
every decoding failure ends as ``-32020`` HeaderMismatch in the caller.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from multidict import CIMultiDict, CIMultiDictProxy

from gateway.errors import HeaderMismatch, JsonRpcId
from gateway.protocol.messages import EMPTY
from gateway.seams import Era, HeaderParam

__all__ = [
    "B64_PREFIX",
    "B64_SUFFIX",
    "Headers",
    "check_param_headers",
    "decode_mirrored",
    "param_matches",
    "trim_ows",
]

B64_PREFIX: Final = "=?base64?"
"""Start of a wrapped value; lowercase and case-sensitive (streamable-http.mdx §Value Encoding)."""
B64_SUFFIX: Final = "?="

Headers: TypeAlias = CIMultiDictProxy[str] | CIMultiDict[str]
"""Request headers as aiohttp hands them over: case-insensitive names, repeated lines kept."""

_PLAIN: Final = re.compile(r"[\t\x20-\x7e]*")
"""Header-safe plain value: visible ASCII, SP and HTAB only (no controls, no non-ASCII)."""
_B64: Final = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
"""Standard-alphabet base64 with mandatory padding (RFC 4648 §4)."""
_NUMBER: Final = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_NUMBER_CHARS: Final = 32
_ABSENT: Final = object()


def trim_ows(value: str) -> str:
    """Strip optional whitespace (SP / HTAB) around a field value (RFC 9110 §5.5)."""
    return value.strip(" \t")


def decode_mirrored(raw: str) -> str | None:
    """Decode an ``Mcp-Name`` / ``Mcp-Param-*`` value; None when it is not a valid encoding.

    The value is OWS-trimmed first (a plain ``"  get_weather  "`` is accepted, digest §6
    item 13). A value wrapped as ``=?base64?…?=`` must carry canonical standard base64 of valid
    UTF-8; the decoded payload is never trimmed. A plain value may hold only visible ASCII, SP
    and HTAB. A plain value that merely looks wrapped but is not valid base64 is refused, as a
    conforming client would have wrapped it.
    """
    value = trim_ows(raw)
    if (
        value.startswith(B64_PREFIX)
        and value.endswith(B64_SUFFIX)
        and len(value) >= len(B64_PREFIX) + len(B64_SUFFIX)
    ):
        return _decode_base64_utf8(value[len(B64_PREFIX) : -len(B64_SUFFIX)])
    if _PLAIN.fullmatch(value) is None:
        return None
    return value


def _decode_base64_utf8(payload: str) -> str | None:
    if _B64.fullmatch(payload) is None:
        return None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    # Canonical form only: non-zero padding bits ("SGk=" vs "SGl=") would give two spellings
    # of one value, and a routing proxy might compare the spelling, not the bytes.
    if base64.b64encode(data).decode("ascii") != payload:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def param_matches(kind: str, decoded: str, body: Any) -> bool:
    """Whether a decoded ``Mcp-Param-*`` value represents ``body`` (tools.mdx §x-mcp-header).

    Conversion: a string is compared as is; a boolean as lowercase ``true``/``false``; an
    integer as a decimal number, compared numerically (``42`` matches ``42.0``). A body value
    of another JSON type than declared never matches.
    """
    if kind == "string":
        return isinstance(body, str) and decoded == body
    if kind == "boolean":
        return isinstance(body, bool) and decoded == ("true" if body else "false")
    if kind == "integer":
        if isinstance(body, bool) or not isinstance(body, int | float):
            return False
        if isinstance(body, float) and not (math.isfinite(body) and body.is_integer()):
            return False
        if len(decoded) > _MAX_NUMBER_CHARS or _NUMBER.fullmatch(decoded) is None:
            return False
        try:
            return Decimal(decoded) == Decimal(body)
        except InvalidOperation:
            return False
    return False


def check_param_headers(
    headers: Headers,
    declared: Sequence[HeaderParam],
    arguments: Any,
    *,
    request_id: JsonRpcId | None,
    era: Era,
) -> Mapping[str, str]:
    """Validate the ``Mcp-Param-*`` headers a tool declares; return the values to forward.

    For each declared
    parameter: more than one header line, a header without a body value (absent or null), a
    body value (present, non-null) without a header, an undecodable header, or a value that does
    not match the body raises :class:`HeaderMismatch`. Undeclared ``Mcp-Param-*`` headers are
    ignored: the backend receives only the canonical request.
    """
    args = arguments if isinstance(arguments, dict) else None
    forward: dict[str, str] = {}
    for param in declared:
        lines = headers.getall("Mcp-Param-" + param.header, [])
        if len(lines) > 1:
            raise HeaderMismatch(request_id=request_id, era=era, detail="duplicate Mcp-Param")
        body = _lookup(args, param.path)
        if body is _ABSENT or body is None:
            # The client MUST NOT send it then; a stray header is a mismatch (as the SDK does).
            if lines:
                raise HeaderMismatch(request_id=request_id, era=era, detail="Mcp-Param no body")
            continue
        if not lines:
            raise HeaderMismatch(request_id=request_id, era=era, detail="Mcp-Param missing")
        decoded = decode_mirrored(lines[0])
        if decoded is None or not param_matches(param.type, decoded, body):
            raise HeaderMismatch(request_id=request_id, era=era, detail="Mcp-Param mismatch")
        forward[param.header] = trim_ows(lines[0])
    return MappingProxyType(forward) if forward else EMPTY


def _lookup(args: dict[str, Any] | None, path: Sequence[str]) -> Any:
    node: Any = args
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _ABSENT
        node = node[key]
    return node
