"""MCP 2026-07-28 tools.mdx §x-mcp-header and streamable-http.mdx §Request Metadata.

Two jobs, both pure:

* :func:`header_params` reads a tool's ``inputSchema`` and returns the ``x-mcp-header``
  annotations as :class:`~gateway.seams.HeaderParam` values, or raises ``ValueError`` with a fixed
  reason when an annotation is invalid (clients MUST drop such tools, and so does the catalog).
* :func:`encode_header_value` / :func:`param_header_value` produce ``Mcp-Name`` and
  ``Mcp-Param-*`` values for requests the gateway sends upstream, base64-wrapping any value that is
  not plain header-safe ASCII (``=?base64?<b64 of UTF-8>?=``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal

from gateway.seams import HeaderParam

__all__ = [
    "MAX_HEADER_DEPTH",
    "encode_header_value",
    "header_params",
    "is_header_safe",
    "param_header_value",
    "param_values",
]

MAX_HEADER_DEPTH: Final = 16
"""Longest ``properties`` chain searched for annotations; deeper schemas are refused."""

_ANNOTATION: Final = "x-mcp-header"
# RFC 9110 §5.6.2: token = 1*tchar.
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_TYPES: Final = ("string", "integer", "boolean")

# JSON Schema 2020-12 keywords whose value is a map of name -> subschema.
_SCHEMA_MAPS: Final = frozenset(
    {"$defs", "definitions", "patternProperties", "dependentSchemas", "dependencies"}
)
# Keywords whose value is one subschema or an array of subschemas.
_SCHEMA_VALUES: Final = frozenset(
    {
        "items",
        "prefixItems",
        "additionalItems",
        "contains",
        "additionalProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "allOf",
        "anyOf",
        "oneOf",
    }
)


def header_params(input_schema: Mapping[str, Any]) -> tuple[HeaderParam, ...]:
    """Every ``x-mcp-header`` annotation of ``input_schema``, in schema order.

    Raises ``ValueError`` with a short reason when an annotation breaks a rule of tools.mdx:
    the value must be a non-empty RFC 9110 token (so no CR/LF or control characters), unique
    case-insensitively, placed on a ``string``/``integer``/``boolean`` property, and reachable
    from the root only through ``properties`` (not ``items``, ``oneOf``, ``$ref``, ``$defs``...).
    """
    if _ANNOTATION in input_schema:
        raise ValueError("x-mcp-header on the schema root")
    found: list[HeaderParam] = []
    seen: set[str] = set()
    for path, schema in _property_chain(input_schema, ()):
        if _ANNOTATION not in schema:
            continue
        name = schema[_ANNOTATION]
        if not isinstance(name, str) or not name:
            raise ValueError("x-mcp-header must be a non-empty string")
        if not _TOKEN.fullmatch(name):
            raise ValueError("x-mcp-header must be an RFC 9110 token")
        if name.lower() in seen:
            raise ValueError("x-mcp-header names must be unique (case-insensitive)")
        seen.add(name.lower())
        found.append(HeaderParam(header=name, path=path, type=_header_type(schema)))
    # Annotations anywhere else (items, combinators, $defs, ...) make the tool invalid.
    for subschema in _other_subschemas(input_schema):
        if _contains_annotation(subschema, 0):
            raise ValueError("x-mcp-header is only allowed along properties chains")
    return tuple(found)


def _header_type(schema: Mapping[str, Any]) -> Literal["string", "integer", "boolean"]:
    declared = schema.get("type")
    # A nullable property (["string", "null"]) is fine: the header is only sent when non-null.
    types = [declared] if isinstance(declared, str) else declared
    if isinstance(types, list):
        concrete = [t for t in types if t != "null"]
        if len(concrete) == 1 and concrete[0] in _HEADER_TYPES:
            kind: Literal["string", "integer", "boolean"] = concrete[0]
            return kind
    raise ValueError("x-mcp-header is only allowed on string, integer or boolean properties")


def _property_chain(
    schema: Mapping[str, Any], path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Mapping[str, Any]]]:
    """Yield (path, subschema) for every property reachable through ``properties`` only."""
    if len(path) > MAX_HEADER_DEPTH:
        raise ValueError("inputSchema properties nest too deeply")
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return
    for key, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        sub_path = (*path, str(key))
        yield sub_path, sub
        yield from _property_chain(sub, sub_path)
        for other in _other_subschemas(sub):
            if _contains_annotation(other, 0):
                raise ValueError("x-mcp-header is only allowed along properties chains")


def _other_subschemas(schema: Mapping[str, Any]) -> Iterator[Any]:
    """Subschemas of ``schema`` that are NOT reached through ``properties``."""
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            yield from value.values()
        elif key in _SCHEMA_VALUES:
            if isinstance(value, list):
                yield from value
            else:
                yield value


def _contains_annotation(schema: Any, depth: int) -> bool:
    if not isinstance(schema, Mapping):
        return False
    if depth > 64:
        raise ValueError("inputSchema nests too deeply")
    if _ANNOTATION in schema:
        return True
    props = schema.get("properties")
    if isinstance(props, Mapping) and any(
        _contains_annotation(sub, depth + 1) for sub in props.values()
    ):
        return True
    return any(_contains_annotation(sub, depth + 1) for sub in _other_subschemas(schema))


# --- value encoding (streamable-http.mdx §Request Metadata, value encoding) -------------------

_SAFE: Final = re.compile(r"[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?")
_B64_PREFIX: Final = "=?base64?"
_B64_SUFFIX: Final = "?="


def is_header_safe(value: str) -> bool:
    """Plain header-safe: visible ASCII, SP, HTAB; no leading/trailing whitespace."""
    return bool(_SAFE.fullmatch(value))


def encode_header_value(value: str) -> str:
    """The on-the-wire form of an ``Mcp-Name``/``Mcp-Param-*`` value.

    Values that are not plain header-safe, and plain values that look like the base64 form,
    are sent as ``=?base64?<base64 of the UTF-8 bytes>?=`` (prefix and suffix lowercase).
    """
    if is_header_safe(value) and not (
        value.startswith(_B64_PREFIX) and value.endswith(_B64_SUFFIX)
    ):
        return value
    payload = base64.b64encode(value.encode("utf-8")).decode("ascii")
    return f"{_B64_PREFIX}{payload}{_B64_SUFFIX}"


def param_header_value(value: Any, kind: Literal["string", "integer", "boolean"]) -> str | None:
    """Convert an argument to its header text; None when it must not be sent (null, wrong type).

    Strings go as-is, integers as decimal, booleans as lowercase ``true``/``false``.
    """
    if value is None:
        return None
    if kind == "boolean":
        return ("true" if value else "false") if isinstance(value, bool) else None
    if kind == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return str(value) if isinstance(value, int) else None
    return encode_header_value(value) if isinstance(value, str) else None


def param_values(params: tuple[HeaderParam, ...], arguments: Mapping[str, Any]) -> dict[str, str]:
    """``Mcp-Param-<header>`` headers for ``arguments``, derived from the validated body.

    The body is the source of truth (streamable-http.mdx §Server Validation), so the gateway
    recomputes these values instead of copying the client's header bytes.
    """
    headers: dict[str, str] = {}
    for param in params:
        node: Any = arguments
        for key in param.path:
            node = node.get(key) if isinstance(node, Mapping) else None
            if node is None:
                break
        text = param_header_value(node, param.type)
        if text is not None:
            headers[f"Mcp-Param-{param.header}"] = text
    return headers
