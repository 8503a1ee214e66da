"""What the demo's small 2026-07-28 backends (the vault, the accounts service) share: reading a
posted JSON-RPC request and writing its answer (DEVELOPMENT ONLY).

:func:`read_call` turns a body into an :class:`RpcCall`, or into the answer already due (a
parse error, an invalid request, a notification's 202, another protocol version);
:func:`rpc_result` and :func:`rpc_error` write the replies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

__all__ = ["VERSION", "RpcCall", "read_call", "rpc_error", "rpc_result"]

VERSION: Final = "2026-07-28"


@dataclass(frozen=True, slots=True)
class RpcCall:
    """A request to answer: its id, method and params (an object, else empty)."""

    rid: Any
    method: str
    params: dict[str, Any]


def read_call(body: bytes, headers: Mapping[str, str]) -> RpcCall | web.Response:
    """The request in ``body``, or the answer already due (see the module docstring)."""
    try:
        message = json.loads(body)
    except ValueError:
        return rpc_error(None, 400, -32700, "Parse error")
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return rpc_error(None, 400, -32600, "Invalid Request")
    if "id" not in message:
        return web.Response(status=202)  # notifications: accepted
    rid = message["id"]
    if headers.get("MCP-Protocol-Version") != VERSION:
        return rpc_error(rid, 400, -32022, "Unsupported protocol version")
    raw_params = message.get("params")
    return RpcCall(rid, message["method"], raw_params if isinstance(raw_params, dict) else {})


def rpc_result(rid: Any, result: Mapping[str, Any], server_info: Mapping[str, str]) -> web.Response:
    """A complete result, with the server's ``serverInfo`` in its ``_meta``."""
    meta = {"io.modelcontextprotocol/serverInfo": server_info}
    reply = {"resultType": "complete", **result, "_meta": meta}
    return web.json_response({"jsonrpc": "2.0", "id": rid, "result": reply})


def rpc_error(rid: Any, status: int, code: int, message: str) -> web.Response:
    body = {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
    return web.json_response(body, status=status)
