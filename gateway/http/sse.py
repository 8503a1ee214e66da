"""The one writer of server-sent events (MCP streamable-http.mdx; WHATWG HTML §9.2): the
headers of an SSE response and the bytes of its events, for the progress relay, the
``subscriptions/listen`` stream and a legacy session's GET stream.

A JSON-RPC message is one ``message`` event whose data is the compact JSON of
:func:`gateway.jsonkit.write.compact` (UTF-8: SSE is always UTF-8, and JSON escapes every CR
and LF, so one ``data:`` line holds it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway import SERVER_PRODUCT
from gateway.jsonkit.write import compact

__all__ = ["KEEPALIVE", "SSE_HEADERS", "json_event", "message_event"]

SSE_HEADERS: Final = {
    "Server": SERVER_PRODUCT,  # prepared here, past the listener's own stamping
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-store",
    # streamable-http.mdx: SHOULD be set so nginx does not buffer the stream.
    "X-Accel-Buffering": "no",
}
KEEPALIVE: Final = b": keepalive\n\n"
"""A comment line: keeps proxies from timing an idle stream out, ignored by clients."""


def message_event(data: bytes) -> bytes:
    """One ``message`` event carrying ``data`` (already JSON, a single line)."""
    return b"event: message\ndata: " + data + b"\n\n"


def json_event(message: Mapping[str, Any]) -> bytes:
    """One ``message`` event carrying the JSON-RPC ``message``."""
    return message_event(compact(message))
