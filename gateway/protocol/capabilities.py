"""Client capabilities as the gateway passes them on (MCP 2026-07-28 schema ``ClientCapabilities``).

A modern client declares its capabilities on every request
(``_meta["io.modelcontextprotocol/clientCapabilities"]``); the gateway forwards them on the
upstream ``tools/call`` so the upstream does not answer ``-32021`` for a capability the client
has. The upstream's ``-32021`` ``data.requiredCapabilities`` goes the other way. Both directions
use :func:`known_capabilities`: only the keys the schema defines survive, rebuilt from plain JSON
(canonical forwarding, architecture invariant 5), each settings object bounded:

- ``elicitation`` (``form``, ``url``), ``sampling`` (``context``, ``tools``): objects whose known
  members are settings objects; ``roots``: an empty object (the schema defines no members);
- ``experimental``, ``extensions``: maps of at most :data:`MAX_ENTRIES` names (1-128 printable
  characters) to settings objects;
- a settings object larger than :data:`MAX_SETTINGS_BYTES` or nested deeper than
  :data:`MAX_DEPTH` becomes ``{}`` (support still declared, settings dropped); the whole result
  stays under :data:`MAX_TOTAL_BYTES` (``experimental`` and ``extensions`` go first).

Anything else (unknown keys, wrong types) is dropped without an error: capabilities are hints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway.jsonkit.read import JsonError
from gateway.jsonkit.write import canonical, plain_copy

__all__ = [
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "MAX_SETTINGS_BYTES",
    "MAX_TOTAL_BYTES",
    "known_capabilities",
]

MAX_SETTINGS_BYTES: Final = 1024
"""Largest settings object (canonical JSON bytes) kept as is."""
MAX_DEPTH: Final = 4
"""Deepest nesting inside a settings object kept as is."""
MAX_ENTRIES: Final = 16
"""Names kept per ``experimental`` / ``extensions`` map."""
MAX_TOTAL_BYTES: Final = 4096
"""Largest forwarded capabilities object (canonical JSON bytes)."""
_MAX_NAME: Final = 128
_SUBKEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "elicitation": ("form", "url"),
    "sampling": ("context", "tools"),
    "roots": (),
}
_MAPS: Final = ("experimental", "extensions")


def known_capabilities(raw: Any) -> dict[str, Any]:
    """The schema-known part of a ``ClientCapabilities`` object, rebuilt and bounded."""
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key, members in _SUBKEYS.items():
        value = raw.get(key)
        if isinstance(value, Mapping):
            out[key] = {
                member: _settings(value[member])
                for member in members
                if isinstance(value.get(member), Mapping)
            }
    for key in _MAPS:
        value = raw.get(key)
        if isinstance(value, Mapping):
            entries = [
                (name, _settings(settings))
                for name, settings in value.items()
                if _valid_name(name) and isinstance(settings, Mapping)
            ]
            out[key] = dict(sorted(entries)[:MAX_ENTRIES])
    if out and _size(out) > MAX_TOTAL_BYTES:  # an empty result needs no measuring
        for key in _MAPS:
            out.pop(key, None)
    return out


def _valid_name(name: Any) -> bool:
    return isinstance(name, str) and 0 < len(name) <= _MAX_NAME and name.isprintable()


def _settings(value: Mapping[str, Any]) -> dict[str, Any]:
    try:
        copy: Any = plain_copy(value, sort_keys=True)  # nothing shared with the parser
    except JsonError:
        return {}
    if _size(copy) > MAX_SETTINGS_BYTES:
        return {}
    return copy if isinstance(copy, dict) and _depth(copy) <= MAX_DEPTH else {}


def _depth(value: Any, level: int = 1) -> int:
    children = value.values() if isinstance(value, dict) else value
    deepest = level
    for child in children:
        if isinstance(child, dict | list):
            deepest = max(deepest, _depth(child, level + 1))
    return deepest


def _size(value: Any) -> int:
    # Measured with non-ASCII escaped, as these bounds always were.
    return len(canonical(value, ascii_only=True))
