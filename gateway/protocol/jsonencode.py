"""Compact JSON for the hot path: orjson's speed with the standard encoder's semantics.

The reference is ``json.dumps(value, ensure_ascii=False, allow_nan=False,
separators=(",", ":"))`` (with ``sort_keys`` for canonical forwarding). orjson encodes a typical
``tools/call`` envelope several times faster, but it differs in a few places, each of which
falls back to the reference encoder so the result (or the error) is the reference's:

- it writes ``NaN`` and ``±Infinity`` as ``null`` where the reference refuses them: an output
  without ``null`` (one scan of the bytes) cannot hold one; a short output with ``null`` (an
  error envelope whose ``id`` is unknown) is checked by a walk of the value for non-finite
  floats; a longer one is encoded again by the reference;
- it refuses what the reference takes (integers beyond 64 bits, non-string keys, subclasses of
  the built-in types, a lone surrogate) and takes what the reference refuses (dataclasses,
  datetimes: passed through, so refused like any foreign object): on any refusal the reference
  decides;
- numbers are written in shortest round-trip form by both, but an exponent reads ``1e16`` in
  orjson and ``1e+16`` in the reference: the same value (RFC 8259 §6).
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

import orjson

__all__ = ["compact"]

_OPTIONS: Final = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
_SORTED: Final = _OPTIONS | orjson.OPT_SORT_KEYS
_WALK_BELOW: Final = 2048
"""Outputs with ``null`` shorter than this are checked by walking the value (faster there
than encoding again; the reference's C encoder wins on large values)."""
_REFERENCE: Final = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
_REFERENCE_SORTED: Final = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True
)


def compact(value: Any, *, sort_keys: bool = False) -> bytes:
    """``value`` as compact UTF-8 JSON bytes.

    Raises what the reference encoder raises: ``TypeError`` (a foreign object), ``ValueError``
    (a non-finite float), ``RecursionError``, and ``UnicodeEncodeError`` (a lone surrogate
    cannot be UTF-8).
    """
    try:
        out = orjson.dumps(value, option=_SORTED if sort_keys else _OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        pass
    else:
        if b"null" not in out or (len(out) < _WALK_BELOW and _finite(value)):
            return out
    encoder = _REFERENCE_SORTED if sort_keys else _REFERENCE
    return encoder.encode(value).encode("utf-8")


def _finite(value: Any) -> bool:
    """No NaN or infinity anywhere in ``value`` (dicts, lists and tuples, iteratively)."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:  # orjson passed subclasses through: only the exact types get here
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):
            return False
    return True
