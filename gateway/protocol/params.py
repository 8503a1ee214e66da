"""Per-method params of an admitted request, both eras (classification step M10).

The prompts, resources and completion methods (2026-07-28 server/prompts.mdx,
server/resources.mdx, server/utilities/completion.mdx; the same shapes in 2025): ``prompts/get``
``name`` a string and ``arguments`` an object of strings (null is absent); ``resources/read``
``uri`` a non-empty string of at most :data:`MAX_URI_CHARS`; ``completion/complete`` ``ref`` a
``ref/prompt`` with a string ``name`` or a ``ref/resource`` with a string ``uri``, ``argument``
with string ``name`` and ``value``, ``context.arguments`` an object of strings; the list methods
``cursor`` a string. Whether a prompt's arguments match what it declares is checked at dispatch,
against the catalog.

``tools/call``: ``name`` a string, ``arguments`` an object (null is absent), ``progressToken`` a
string of at most 128 bytes or a safe integer; on the modern path also the retry members of an
input round (MCP 2026-07-28 basic/patterns/mrtr.mdx), ``requestState`` a string and
``inputResponses`` an object (null is absent; their content is checked at dispatch, after the
policy). ``tools/list``: ``cursor`` a string (null is absent). Anything else -> -32602.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway.errors import InvalidParams, JsonRpcId
from gateway.protocol.jsonrpc import valid_id
from gateway.protocol.messages import EMPTY, Completion, McpMessage
from gateway.protocol.tasks_extension import TASK_METHODS
from gateway.seams import Era

__all__ = ["LIST_METHODS", "MAX_URI_CHARS", "build_request"]

LIST_METHODS: Final = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list"}
)
"""Methods whose only param is an opaque ``cursor``."""
MAX_URI_CHARS: Final = 2048
"""Longest ``resources/read`` (or legacy subscribe) URI or completion reference accepted."""
_URI_METHODS: Final = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})
MAX_COMPLETION_VALUE: Final = 4096
"""Longest completion ``argument.value`` and context value accepted."""
MAX_CONTEXT_ARGUMENTS: Final = 64


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
    task_id: str | None = None
    prompt_name: str | None = None
    resource_uri: str | None = None
    completion: Completion | None = None
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
    elif method in LIST_METHODS:
        raw_cursor = params.get("cursor")
        if raw_cursor is not None and type(raw_cursor) is not str:
            raise InvalidParams(request_id=rid, era=era, detail=f"{method} cursor")
        cursor = raw_cursor
    elif method == "prompts/get":
        name = params.get("name")
        if type(name) is not str:
            raise InvalidParams(request_id=rid, era=era, detail="prompts/get name")
        prompt_name = name
        arguments = _strings(params.get("arguments"), rid, era, "prompts/get arguments")
    elif method in _URI_METHODS:
        uri = params.get("uri")
        if type(uri) is not str or not 0 < len(uri) <= MAX_URI_CHARS:
            raise InvalidParams(request_id=rid, era=era, detail=f"{method} uri")
        resource_uri = uri
    elif method == "completion/complete":
        completion = _completion(params, rid, era)
    elif method in TASK_METHODS:
        task_id, input_responses = _task_members(method, params, rid)
    return McpMessage(
        era=era,
        version=version,
        id=rid,
        method=method,
        params=params,
        tool_name=tool_name,
        arguments=arguments,
        cursor=cursor,
        prompt_name=prompt_name,
        uri=resource_uri,
        completion=completion,
        progress_token=progress,
        header_params=header_params,
        client_capabilities=client_capabilities,
        request_state=request_state,
        input_responses=input_responses,
        task_id=task_id,
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


def _task_members(
    method: str, params: Mapping[str, Any], rid: JsonRpcId
) -> tuple[str, Mapping[str, Any] | None]:
    """``taskId`` (a string; the ladder already compared it with ``Mcp-Name``) and, for
    ``tasks/update``, ``inputResponses`` (an object, required: SEP-2663 UpdateTaskRequest)."""
    task_id = params.get("taskId")
    if type(task_id) is not str:
        raise InvalidParams(request_id=rid, era="modern", detail=f"{method} taskId")
    if method != "tasks/update":
        return task_id, None
    responses = params.get("inputResponses")
    if not isinstance(responses, dict):
        raise InvalidParams(request_id=rid, era="modern", detail="tasks/update inputResponses")
    return task_id, responses


def _strings(raw: Any, rid: JsonRpcId, era: Era, detail: str) -> Mapping[str, str]:
    """An object whose values are all strings (null or absent: empty)."""
    if raw is None:
        return EMPTY
    if not isinstance(raw, dict) or not all(type(v) is str for v in raw.values()):
        raise InvalidParams(request_id=rid, era=era, detail=detail)
    return raw


def _completion(params: Mapping[str, Any], rid: JsonRpcId, era: Era) -> Completion:
    ref = params.get("ref")
    argument = params.get("argument")
    context = params.get("context")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise InvalidParams(request_id=rid, era=era, detail="completion ref/argument")
    ref_type = ref.get("type")
    target = ref.get("name") if ref_type == "ref/prompt" else ref.get("uri")
    if ref_type not in ("ref/prompt", "ref/resource") or type(target) is not str:
        raise InvalidParams(request_id=rid, era=era, detail="completion ref")
    if not 0 < len(target) <= MAX_URI_CHARS:
        raise InvalidParams(request_id=rid, era=era, detail="completion ref")
    name, value = argument.get("name"), argument.get("value")
    if type(name) is not str or type(value) is not str or len(value) > MAX_COMPLETION_VALUE:
        raise InvalidParams(request_id=rid, era=era, detail="completion argument")
    resolved: Mapping[str, str] = EMPTY
    if context is not None:
        if not isinstance(context, dict):
            raise InvalidParams(request_id=rid, era=era, detail="completion context")
        resolved = _strings(context.get("arguments"), rid, era, "completion context")
        if len(resolved) > MAX_CONTEXT_ARGUMENTS or any(
            len(v) > MAX_COMPLETION_VALUE for v in resolved.values()
        ):
            raise InvalidParams(request_id=rid, era=era, detail="completion context")
    return Completion(str(ref_type), target, name, value, resolved)
