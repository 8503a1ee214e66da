"""Compact JSON for the hot path: orjson's speed with the standard encoder's semantics.

The reference is ``json.dumps(value, ensure_ascii=False, allow_nan=False,
separators=(",", ":"))`` (with ``sort_keys`` for canonical forwarding). orjson encodes a typical
``tools/call`` envelope several times faster, but it differs in a few places, each of which
falls back to the reference encoder so the result (or the error) is the reference's:

- it writes ``NaN`` and ``±Infinity`` as ``null`` where the reference refuses them: any output
  containing ``null`` is encoded again by the reference (``null`` is rare in tool results, and
  the check is one scan of the bytes);
- it refuses what the reference takes (integers beyond 64 bits, non-string keys, subclasses of
  the built-in types, a lone surrogate) and takes what the reference refuses (dataclasses,
  datetimes: passed through, so refused like any foreign object): on any refusal the reference
  decides;
- numbers are written in shortest round-trip form by both, but an exponent reads ``1e16`` in
  orjson and ``1e+16`` in the reference: the same value (RFC 8259 §6).
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

__all__ = ["compact"]

_OPTIONS: Final = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
_SORTED: Final = _OPTIONS | orjson.OPT_SORT_KEYS
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
        if b"null" not in out:
            return out
    encoder = _REFERENCE_SORTED if sort_keys else _REFERENCE
    return encoder.encode(value).encode("utf-8")
