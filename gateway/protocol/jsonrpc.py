"""JSON-RPC 2.0 request envelopes as MCP admits them (JSON-RPC 2.0 §4; MCP basic/index.mdx
§Messages, §Requests, §Notifications).

Pure checks shared by both eras: what an id may be, and whether one decoded value is a single
request or notification. Failures raise :class:`~gateway.errors.InvalidRequest` (``-32600``).
"""

from __future__ import annotations

from typing import Any, Final

from gateway.errors import InvalidRequest, JsonRpcId
from gateway.seams import Era

__all__ = [
    "MAX_ID_BYTES",
    "MAX_SAFE_INTEGER",
    "MISSING",
    "NOTIFICATION_PREFIX",
    "parse_envelope",
    "peek_id",
    "valid_id",
]

MAX_ID_BYTES: Final = 128
"""Longest string id, in UTF-8 bytes; longer ids are -32600."""
MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Integer ids must lie within ±(2^53-1) so every JSON implementation reads them exactly."""
NOTIFICATION_PREFIX: Final = "notifications/"
"""Every MCP notification method lives under this prefix."""
MISSING: Final = object()
"""Sentinel for an absent member (distinct from an explicit JSON null)."""

_ENVELOPE_KEYS: Final = frozenset({"jsonrpc", "id", "method", "params"})


def valid_id(value: Any) -> bool:
    """A string of at most 128 UTF-8 bytes or an integer within ±(2^53-1); never null, a
    boolean or a number written with a fraction or exponent (those decode to float)."""
    if type(value) is str:
        return len(value.encode("utf-8", "surrogatepass")) <= MAX_ID_BYTES
    if type(value) is int:  # type() rather than isinstance(): bool is an int subclass
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    return False


def peek_id(message: Any) -> JsonRpcId | None:
    """The id of ``message`` when it is an object with a valid id, else None (answer ``null``)."""
    if isinstance(message, dict):
        value = message.get("id")
        if valid_id(value):
            return value  # type: ignore[no-any-return,unused-ignore]
    return None


def parse_envelope(
    message: Any, era: Era, request_id: JsonRpcId | None
) -> tuple[JsonRpcId | None, str, dict[str, Any]]:
    """Check one request or notification; return ``(id or None, method, params or {})``.

    ``request_id`` is ``peek_id(message)``, passed in so the caller computes it once. Refused
    with -32600: a non-object; a posted response; ``jsonrpc`` other than ``"2.0"``; members
    besides jsonrpc/id/method/params; a missing, empty or non-string method; an invalid id;
    non-object params; a non-``notifications/`` method without an id.
    """
    if not isinstance(message, dict):
        raise InvalidRequest(era=era, detail="not a single JSON-RPC object")
    if "method" not in message and ("result" in message or "error" in message):
        # Clients MUST NOT POST responses (streamable-http.mdx §Sending Messages); the gateway
        # never sends requests to clients, so no response is ever expected.
        raise InvalidRequest(request_id=request_id, era=era, detail="posted response")
    if message.get("jsonrpc") != "2.0":
        raise InvalidRequest(request_id=request_id, era=era, detail="jsonrpc member")
    if not _ENVELOPE_KEYS.issuperset(message):
        raise InvalidRequest(request_id=request_id, era=era, detail="unknown member")
    method = message.get("method")
    if type(method) is not str or not method:
        raise InvalidRequest(request_id=request_id, era=era, detail="method member")
    if "id" in message and request_id is None:
        raise InvalidRequest(era=era, detail="id member")
    params = message.get("params", MISSING)
    if params is MISSING:
        params = {}
    elif not isinstance(params, dict):
        raise InvalidRequest(request_id=request_id, era=era, detail="params member")
    is_notification = "id" not in message
    if is_notification and not method.startswith(NOTIFICATION_PREFIX):
        # MCP notifications all live under notifications/; a request without an id would
        # silently never be answered.
        raise InvalidRequest(era=era, detail="request without id")
    return (None if is_notification else request_id), method, params
