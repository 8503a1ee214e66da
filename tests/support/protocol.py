"""Builders for MCP wire messages and headers, shared by the protocol tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from multidict import CIMultiDict

from gateway.protocol.versions import MODERN
from gateway.seams import HeaderParam, ToolDef

__all__ = [
    "META_CAPS",
    "META_VERSION",
    "headers",
    "lookup",
    "modern_body",
    "modern_headers",
    "request",
    "tool",
]

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"


def headers(*pairs: tuple[str, str]) -> CIMultiDict[str]:
    """Header lines in order; repeat a name to send it twice."""
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in pairs:
        out.add(name, value)
    return out


def modern_headers(
    method: str, name: str | None = None, *, version: str = MODERN, **params: str
) -> CIMultiDict[str]:
    """The mirrored headers a conforming 2026-07-28 client sends."""
    pairs = [("MCP-Protocol-Version", version), ("Mcp-Method", method)]
    if name is not None:
        pairs.append(("Mcp-Name", name))
    pairs.extend((f"Mcp-Param-{key}", value) for key, value in params.items())
    return headers(*pairs)


def request(method: str, params: dict[str, Any] | None = None, *, id: Any = 1) -> dict[str, Any]:
    """A JSON-RPC request (``id=...`` omitted when ``id`` is the string "<none>")."""
    body: dict[str, Any] = {"jsonrpc": "2.0"}
    if id != "<none>":
        body["id"] = id
    body["method"] = method
    if params is not None:
        body["params"] = params
    return body


def modern_body(
    method: str,
    *,
    id: Any = 1,
    version: Any = MODERN,
    capabilities: Any = None,
    **params: Any,
) -> dict[str, Any]:
    """A 2026-07-28 request with the required ``_meta`` keys."""
    meta = {META_VERSION: version, META_CAPS: {} if capabilities is None else capabilities}
    return request(method, {**params, "_meta": meta}, id=id)


def tool(name: str, *header_params: HeaderParam, schema: dict[str, Any] | None = None) -> ToolDef:
    definition = {
        "name": name,
        "description": f"The {name} tool",
        "inputSchema": schema or {"type": "object"},
    }
    return ToolDef(name=name, definition=definition, header_params=tuple(header_params))


def lookup(tools: Iterable[ToolDef] = ()) -> Callable[[str], ToolDef | None]:
    table = {item.name: item for item in tools}
    return table.get
