"""Opaque, stateless ``tools/list`` cursors (MCP 2026-07-28 server/utilities/pagination.mdx).

A cursor names the last tool of the previous page: ``base64url(b"1:" + name)`` without padding.
The tools are ordered by name, so the next page starts at the first name greater than it. Any
replica can continue any other replica's listing without shared state, and a catalog change
between pages neither repeats nor skips a surviving tool. The cursor is not signed: it only
encodes a position in the caller's own, already filtered list, so a forged cursor can do no
more than skip ahead, which the caller could do anyway.
"""

from __future__ import annotations

from typing import Final

from gateway import b64url

__all__ = ["MAX_CURSOR_CHARS", "decode_cursor", "encode_cursor"]

_TAG: Final = b"1:"
"""Format version; a future format changes the tag and old cursors fail as "invalid"."""
MAX_CURSOR_CHARS: Final = 1024
"""Longer cursors are refused before decoding (tool names are at most 128 characters)."""


def encode_cursor(last_name: str) -> str:
    """The cursor that continues after the tool named ``last_name``."""
    raw = _TAG + last_name.encode("utf-8", "surrogatepass")
    return b64url.encode(raw)


def decode_cursor(cursor: str) -> str | None:
    """The tool name a cursor continues after, or None when ``cursor`` is not one of ours."""
    if len(cursor) > MAX_CURSOR_CHARS:
        return None
    # Canonical spelling only, so one position has exactly one cursor.
    raw = b64url.decode_canonical(cursor)
    if raw is None or not raw.startswith(_TAG):
        return None
    try:
        name = raw[len(_TAG) :].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return name
