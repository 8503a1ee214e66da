"""JSON-RPC 2.0 response envelopes (JSON-RPC 2.0 §5; MCP basic/index.mdx §Responses).

Bodies are compact UTF-8 JSON. ``id`` is written as ``null`` when the request id could not be
read (JSON-RPC 2.0 §5; digest §6 item 11). Non-ASCII text is written as UTF-8, not escaped; a
string that cannot be encoded as UTF-8 (a lone surrogate from an upstream) falls back to
``\\uXXXX`` escapes, so the output is always valid UTF-8 JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.errors import InternalError, JsonRpcId
from gateway.jsonkit.write import compact, compact_ascii

__all__ = ["error_body", "success_body"]


def success_body(request_id: JsonRpcId | None, result: Mapping[str, Any]) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"result":…}`` as bytes.

    Raises :class:`~gateway.errors.InternalError` (carrying ``request_id``) when ``result`` is
    not JSON-serialisable (a non-finite float, a foreign object): the renderer answers -32603
    instead of crashing.
    """
    return _encode({"jsonrpc": "2.0", "id": request_id, "result": result}, request_id)


def error_body(
    request_id: JsonRpcId | None,
    code: int,
    message: str,
    data: Mapping[str, Any] | None = None,
) -> bytes:
    """``{"jsonrpc":"2.0","id":…,"error":{"code","message"[,"data"]}}`` as bytes."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    try:
        return _encode({"jsonrpc": "2.0", "id": request_id, "error": error}, request_id)
    except InternalError:
        # ``data`` is built by the gateway; if it ever fails to encode, drop it rather than
        # fail to report the error at all.
        error.pop("data", None)
        return _encode({"jsonrpc": "2.0", "id": request_id, "error": error}, request_id)


def _encode(envelope: dict[str, Any], request_id: JsonRpcId | None) -> bytes:
    try:
        return compact(envelope)
    except UnicodeEncodeError:
        pass
    except (TypeError, ValueError, RecursionError):
        raise InternalError(request_id=request_id, detail="unserialisable result") from None
    try:
        return compact_ascii(envelope)
    except (TypeError, ValueError, RecursionError):
        raise InternalError(request_id=request_id, detail="unserialisable result") from None
