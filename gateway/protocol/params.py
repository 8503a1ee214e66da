"""Per-method params of an admitted request, both eras (classification step M10).

``tools/call``: ``name`` a string, ``arguments`` an object (null is absent), ``progressToken`` a
string of at most 128 bytes or a safe integer; on the modern path also the retry members of an
input round (MCP 2026-07-28 basic/patterns/mrtr.mdx), ``requestState`` a string and
``inputResponses`` an object (null is absent; their content is checked at dispatch, after the
policy). ``tools/list``: ``cursor`` a string (null is absent). Anything else -> -32602.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.errors import InvalidParams, JsonRpcId
from gateway.protocol.jsonrpc import valid_id
from gateway.protocol.messages import EMPTY, McpMessage
from gateway.seams import Era

__all__ = ["build_request"]


def build_request(
    era: Era,
    version: str,
    rid: JsonRpcId,
    method: str,
    *,
    params: dict[str, Any],
    meta: Mapping[str, Any],
    client_capabilities: Mapping[str, Any] = EMPTY,
    header_params: Mapping[str, str] = EMPTY,
) -> McpMessage:
    tool_name: str | None = None
    arguments: Mapping[str, Any] = EMPTY
    cursor: str | None = None
    progress: str | int | None = None
    request_state: str | None = None
    input_responses: Mapping[str, Any] | None = None
    if method == "tools/call":
        name = params.get("name")
        args = params.get("arguments")
        if type(name) is not str:
            raise InvalidParams(request_id=rid, era=era, detail="tools/call name")
        if args is not None and not isinstance(args, dict):
            raise InvalidParams(request_id=rid, era=era, detail="tools/call arguments")
        tool_name, arguments = name, args or EMPTY
        if era == "modern":  # mrtr.mdx: retry members (legacy revisions do not define them)
            request_state, input_responses = _retry_members(params, rid)
        token = meta.get("progressToken")
        if token is not None:
            if not valid_id(token):  # string (<= 128 bytes) or safe integer, like an id
                raise InvalidParams(request_id=rid, era=era, detail="progressToken")
            progress = token
    elif method == "tools/list":
        raw_cursor = params.get("cursor")
        if raw_cursor is not None and type(raw_cursor) is not str:
            raise InvalidParams(request_id=rid, era=era, detail="tools/list cursor")
        cursor = raw_cursor
    return McpMessage(
        era=era,
        version=version,
        id=rid,
        method=method,
        params=params,
        tool_name=tool_name,
        arguments=arguments,
        cursor=cursor,
        progress_token=progress,
        header_params=header_params,
        client_capabilities=client_capabilities,
        request_state=request_state,
        input_responses=input_responses,
    )


def _retry_members(
    params: Mapping[str, Any], rid: JsonRpcId
) -> tuple[str | None, Mapping[str, Any] | None]:
    """``requestState`` (a string) and ``inputResponses`` (an object); null means absent."""
    state = params.get("requestState")
    responses = params.get("inputResponses")
    if state is not None and type(state) is not str:
        raise InvalidParams(request_id=rid, era="modern", detail="tools/call requestState")
    if responses is not None and not isinstance(responses, dict):
        raise InvalidParams(request_id=rid, era="modern", detail="tools/call inputResponses")
    return state, responses
