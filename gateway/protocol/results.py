"""Result objects the gateway itself answers with (MCP 2026-07-28 server/discover.mdx,
server/tools.mdx, server/utilities/caching.mdx; 2025-06-18 basic/lifecycle.mdx, utilities/ping.mdx).

Pure builders returning plain dicts ready for :func:`gateway.protocol.envelope.success_body`.
Modern results carry ``resultType: "complete"`` and ``_meta["io.modelcontextprotocol/serverInfo"]``
(basic/index.mdx §ResultType, §_meta); cacheable ones add ``ttlMs`` and ``cacheScope``. Legacy
results omit every 2026-only member and drop what the legacy schemas forbid.

``cacheScope`` is always ``"private"``: the tool list and the ``tools`` capability are filtered
by the caller's scopes and policy, so a result must never be reused across authorization
contexts (caching.mdx §Security; digest §5 item 5).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway import __version__
from gateway.config import ServerInfo
from gateway.errors import InvalidParams, JsonRpcId
from gateway.protocol.cursor import decode_cursor, encode_cursor
from gateway.protocol.messages import McpMessage
from gateway.protocol.versions import LEGACY, SUPPORTED
from gateway.seams import Era, ToolDef

__all__ = [
    "CACHE_SCOPE",
    "LIST_MEMBERS",
    "META_SERVER_INFO",
    "ListPage",
    "discover_result",
    "initialize_result",
    "input_required_result",
    "ping_result",
    "server_implementation",
    "shape_call_result",
    "shape_surface_result",
    "surface_list_result",
    "tool_error_result",
    "tools_list_result",
]

META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
TASKS_EXTENSION_NAME: Final = "io.modelcontextprotocol/tasks"
"""The tasks extension's identifier (``gateway.protocol.tasks_extension.TASKS_EXTENSION``, which
builds on this module)."""
CACHE_SCOPE: Final = "private"
_MODERN_ONLY: Final = ("resultType", "ttlMs", "cacheScope")


def server_implementation(server: ServerInfo) -> dict[str, Any]:
    """The ``Implementation`` object naming the gateway (name, version, optional title)."""
    info: dict[str, Any] = {"name": server.name, "version": __version__}
    if server.title:
        info["title"] = server.title
    return info


def discover_result(
    *,
    server: ServerInfo,
    has_tools: bool,
    ttl_ms: int,
    instructions: str | None,
    surface: Mapping[str, Any] | None = None,
    listen: Mapping[str, Mapping[str, bool]] | None = None,
    tasks: bool = False,
) -> dict[str, Any]:
    """``DiscoverResult`` (2026-07-28): versions, capabilities, caching hints, serverInfo.

    ``capabilities.tools`` is present only when the caller can see at least one tool (the
    conformance suite requires ``tools/list`` to work exactly when it is declared);
    ``surface``: the ``prompts``, ``resources`` and ``completions`` capabilities this caller
    gets; ``listen``: per kind, the ``listChanged`` (and ``resources.subscribe``) flags its
    ``subscriptions/listen`` would be granted (false where absent), set only on a capability
    that is present; ``tasks``: the tasks extension is listed under ``extensions`` (SEP-2663
    §Capability Negotiation: no settings are defined, an empty object).
    """
    capabilities: dict[str, Any] = {"tools": {"listChanged": False}} if has_tools else {}
    capabilities.update(surface or {})
    for kind, flags in (listen or {}).items():
        present = capabilities.get(kind)
        if isinstance(present, dict):
            capabilities[kind] = {**present, **{k: v for k, v in flags.items() if k in present}}
    if tasks:
        capabilities["extensions"] = {TASKS_EXTENSION_NAME: {}}
    result: dict[str, Any] = {
        "resultType": "complete",
        "supportedVersions": list(SUPPORTED),
        "capabilities": capabilities,
    }
    if instructions is not None:
        result["instructions"] = instructions
    _cacheable(result, ttl_ms, server)
    return result


@dataclass(frozen=True, slots=True)
class ListPage:
    """The page of a list a request asks for, and how its result is shaped."""

    cursor: str | None
    """The client's ``params.cursor`` (None or ``""`` for the first page)."""
    page_size: int
    ttl_ms: int
    era: Era
    server: ServerInfo
    request_id: JsonRpcId | None = None

    @classmethod
    def asked(
        cls, message: McpMessage, page_size: int, ttl_ms: int, server: ServerInfo
    ) -> ListPage:
        """The page ``message`` (a list request) asks for."""
        return cls(message.cursor, page_size, ttl_ms, message.era, server, message.id)

    def bounds(self, keys: Sequence[str]) -> tuple[int, int]:
        """Where the page starts and ends in ``keys`` (sorted). A cursor this gateway did not
        issue raises :class:`InvalidParams` carrying the request's id and era (pagination.mdx:
        invalid cursors SHOULD get -32602). The cursor names the last key of the page before,
        so a page survives that key disappearing."""
        start = 0
        if self.cursor:
            after = decode_cursor(self.cursor)
            if after is None:
                raise InvalidParams(
                    request_id=self.request_id, era=self.era, detail="invalid cursor"
                )
            start = bisect_right(keys, after)
        return start, start + max(1, self.page_size)

    def finish(self, result: dict[str, Any], keys: Sequence[str], end: int) -> dict[str, Any]:
        """``nextCursor`` only when more follow; a modern page's caching members (every page of
        one list uses the same scope)."""
        if end < len(keys):
            result["nextCursor"] = encode_cursor(keys[end - 1])
        if self.era == "modern":
            _cacheable(result, self.ttl_ms, self.server)
        return result


def tools_list_result(tools: Sequence[ToolDef], page: ListPage) -> dict[str, Any]:
    """One page of ``ListToolsResult``, tools ordered by name (:class:`ListPage`)."""
    ordered = sorted(tools, key=lambda tool: tool.name)
    keys = [tool.name for tool in ordered]
    start, end = page.bounds(keys)
    if page.era == "modern":
        result: dict[str, Any] = {
            "resultType": "complete",
            "tools": [_modern_tool(tool) for tool in ordered[start:end]],
        }
    else:
        result = {"tools": [_legacy_tool(tool) for tool in ordered[start:end]]}
    return page.finish(result, keys, end)


def _modern_tool(tool: ToolDef) -> dict[str, Any]:
    definition = dict(tool.definition)
    definition["name"] = tool.name
    return definition


def _legacy_tool(tool: ToolDef) -> dict[str, Any]:
    """The Tool object as 2025-03-26 … 2025-11-25 schemas accept it.

    Those schemas require ``inputSchema.type == "object"`` with object-valued ``properties``
    and, when present, ``outputSchema.type == "object"``; 2026-07-28 allows any schema.
    """
    definition = _modern_tool(tool)
    output = definition.get("outputSchema")
    if output is not None and not (isinstance(output, Mapping) and output.get("type") == "object"):
        del definition["outputSchema"]
    schema = definition.get("inputSchema")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        definition["inputSchema"] = {"type": "object"}
    else:
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and not all(
            isinstance(sub, Mapping) for sub in properties.values()
        ):
            # Boolean subschemas (2020-12) become their object equivalents.
            fixed = {name: _object_schema(sub) for name, sub in properties.items()}
            definition["inputSchema"] = {**schema, "properties": fixed}
    return definition


def _object_schema(schema: Any) -> Any:
    if schema is True:
        return {}
    if schema is False:
        return {"not": {}}
    return schema if isinstance(schema, Mapping) else {}


def initialize_result(
    requested: str,
    *,
    server: ServerInfo,
    instructions: str | None,
    surface: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``InitializeResult`` (legacy): echo a supported version, else offer ``LEGACY[0]``.

    lifecycle.mdx §Version Negotiation: a server that supports the requested version MUST
    answer with it, otherwise with another version it supports (its latest). No
    ``Mcp-Session-Id`` here: the handshake adds one only for a caller that could subscribe
    (gateway/http/subscriptions/legacy_sessions.py).
    """
    result: dict[str, Any] = {
        "protocolVersion": requested if requested in LEGACY else LEGACY[0],
        "capabilities": {"tools": {"listChanged": False}, **(surface or {})},
        "serverInfo": server_implementation(server),
    }
    if instructions is not None:
        result["instructions"] = instructions
    return result


def ping_result() -> dict[str, Any]:
    """``ping`` answers with an empty result (2025-06-18 basic/utilities/ping.mdx)."""
    return {}


def shape_call_result(result: Mapping[str, Any], *, era: Era, server: ServerInfo) -> dict[str, Any]:
    """A backend ``CallToolResult`` shaped for the caller's era.

    Modern: ``resultType: "complete"`` and serverInfo added to ``_meta`` (other ``_meta`` keys
    kept). Legacy: 2026-only members removed and a non-object ``structuredContent`` dropped
    (2025-06-18 schema: object only; digest §6 item 21). ``content`` is required by every
    revision and defaults to ``[]``.
    """
    shaped = dict(result)
    if not isinstance(shaped.get("content"), list):
        shaped["content"] = []
    if era == "modern":
        shaped["resultType"] = "complete"
        meta = shaped.get("_meta")
        merged = dict(meta) if isinstance(meta, Mapping) else {}
        merged[META_SERVER_INFO] = server_implementation(server)
        shaped["_meta"] = merged
        return shaped
    for key in _MODERN_ONLY:
        shaped.pop(key, None)
    if "structuredContent" in shaped and not isinstance(shaped["structuredContent"], Mapping):
        del shaped["structuredContent"]
    if "_meta" in shaped and not isinstance(shaped["_meta"], Mapping):
        del shaped["_meta"]
    return shaped


def input_required_result(
    requests: Mapping[str, Any], request_state: str, *, server: ServerInfo
) -> dict[str, Any]:
    """``InputRequiredResult`` (2026-07-28 only; basic/patterns/mrtr.mdx): the validated
    ``inputRequests`` (omitted when the round has none) and the gateway-sealed state."""
    result: dict[str, Any] = {"resultType": "input_required"}
    if requests:
        result["inputRequests"] = dict(requests)
    result["requestState"] = request_state
    result["_meta"] = {META_SERVER_INFO: server_implementation(server)}
    return result


def tool_error_result(text: str) -> dict[str, Any]:
    """A tool execution error the model can read (tools.mdx §Error Handling: ``isError``)."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


LIST_MEMBERS: Final = {
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
"""The member of each list result that holds its items (2026-07-28 schema)."""


def surface_list_result(
    method: str, items: Sequence[tuple[str, Mapping[str, Any]]], page: ListPage
) -> dict[str, Any]:
    """One page of ``prompts/list``, ``resources/list`` or ``resources/templates/list``.

    ``items``: (sort key, definition) pairs (the exposed prompt name, URI or template); paged
    by the same opaque cursors as ``tools/list`` (:class:`ListPage`).
    """
    ordered = sorted(items, key=lambda item: item[0])
    keys = [key for key, _ in ordered]
    start, end = page.bounds(keys)
    result: dict[str, Any] = {"resultType": "complete"} if page.era == "modern" else {}
    result[LIST_MEMBERS[method]] = [dict(definition) for _, definition in ordered[start:end]]
    return page.finish(result, keys, end)


def shape_surface_result(
    result: Mapping[str, Any], *, era: Era, server: ServerInfo, ttl_ms: int | None = None
) -> dict[str, Any]:
    """A validated ``prompts/get``, ``resources/read`` or ``completion/complete`` result for the
    caller's era: modern adds ``resultType`` and serverInfo (and, with ``ttl_ms``, the caching
    members a ``ReadResourceResult`` requires); legacy drops every 2026-only member."""
    shaped = {key: value for key, value in result.items() if key not in _MODERN_ONLY}
    if era == "modern":
        meta = shaped.get("_meta")
        merged = dict(meta) if isinstance(meta, Mapping) else {}
        merged[META_SERVER_INFO] = server_implementation(server)
        shaped = {"resultType": "complete", **shaped, "_meta": merged}
        if ttl_ms is not None:
            shaped["ttlMs"] = max(0, ttl_ms)
            shaped["cacheScope"] = CACHE_SCOPE
    return shaped


def _cacheable(result: dict[str, Any], ttl_ms: int, server: ServerInfo) -> None:
    result["ttlMs"] = max(0, ttl_ms)
    result["cacheScope"] = CACHE_SCOPE  # filtered per caller: never shared (caching.mdx)
    result["_meta"] = {META_SERVER_INFO: server_implementation(server)}
