"""The one MCP test client: the requests a 2026-07-28 or a 2025 client sends to a gateway.

:class:`McpTestClient` is mixed into the stacks that tests drive over real loopback HTTP
(:class:`tests.support.live_stack.LiveStack` and the others): a stack provides ``session`` (an
``aiohttp.ClientSession``) and ``mcp_url``; every method answers ``(status, headers, text)``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import aiohttp

__all__ = [
    "LEGACY",
    "MODERN",
    "McpAt",
    "McpTestClient",
    "legacy_headers",
    "legacy_initialize_body",
    "modern_body",
    "modern_headers",
    "modern_meta",
]

MODERN: Final = "2026-07-28"
LEGACY: Final = "2025-06-18"
ACCEPT: Final = "application/json, text/event-stream"
Answer = tuple[int, dict[str, str], str]

_NAMED: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""The methods whose ``Mcp-Name`` header mirrors a parameter (SEP-2243), and that parameter."""


def modern_meta(capabilities: Mapping[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """The ``_meta`` every 2026-07-28 request carries (``extra``: e.g. ``progressToken``)."""
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": dict(capabilities or {}),
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-test-client", "version": "1"},
        **extra,
    }


def modern_body(
    method: str,
    params: Mapping[str, Any] | None = None,
    *,
    rid: int | str = 1,
    capabilities: Mapping[str, Any] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": method,
        "params": {**(params or {}), "_meta": modern_meta(capabilities, **meta)},
    }


def modern_headers(token: str | None, method: str, name: str | None = None) -> dict[str, str]:
    """The headers of a 2026-07-28 request (``Mcp-Name`` when given), with ``token``."""
    headers = {
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def legacy_headers(token: str | None, version: str = LEGACY) -> dict[str, str]:
    headers = {
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": version,
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def legacy_initialize_body(
    version: str = LEGACY, capabilities: Mapping[str, Any] | None = None, *, rid: int = 0
) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": dict(capabilities or {}),
            "clientInfo": {"name": "legacy-client", "version": "1"},
        },
    }


class McpTestClient:
    """Requests to ``mcp_url`` through ``session``; a bearer token when one is given."""

    session: aiohttp.ClientSession

    @property
    def mcp_url(self) -> str:
        raise NotImplementedError

    async def post(
        self,
        token: str | None,
        body: Mapping[str, Any] | list[Any] | bytes,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        sent = {"Content-Type": "application/json", "Accept": ACCEPT}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        async with self.session.post(self.mcp_url, data=data, headers=sent) as response:
            return response.status, dict(response.headers), await response.text()

    async def modern(
        self,
        token: str | None,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        capabilities: Mapping[str, Any] | None = None,
        rid: int | str = 1,
        headers: Mapping[str, str] | None = None,
        **meta: Any,
    ) -> Answer:
        """One 2026-07-28 request: the required ``_meta`` and the mirrored headers (``Mcp-Name``
        from the parameter it mirrors unless ``name`` is given)."""
        body = modern_body(method, params, rid=rid, capabilities=capabilities, **meta)
        sent = {"MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        if name is None and method in _NAMED:
            name = (params or {}).get(_NAMED[method])
        if name is not None:
            sent["Mcp-Name"] = name
        sent.update(headers or {})
        return await self.post(token, body, sent)

    async def call(
        self,
        token: str | None,
        tool: str = "echo",
        arguments: Mapping[str, Any] | None = None,
        **kw: Any,
    ) -> Answer:
        """A 2026-07-28 ``tools/call``."""
        params = {"name": tool, "arguments": dict(arguments or {})}
        return await self.modern(token, "tools/call", params, name=tool, **kw)

    async def legacy(
        self,
        token: str | None,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        rid: int | str = 5,
        version: str = LEGACY,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """One request of an initialized 2025 client (the gateway keeps no session)."""
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": dict(params or {})}
        return await self.post(token, body, {"MCP-Protocol-Version": version, **(headers or {})})

    async def legacy_initialize(
        self,
        token: str | None,
        *,
        version: str = LEGACY,
        capabilities: Mapping[str, Any] | None = None,
    ) -> dict[str, str]:
        """``initialize`` + ``notifications/initialized``; the headers of the first answer."""
        status, headers, text = await self.post(
            token, legacy_initialize_body(version, capabilities)
        )
        assert status == 200, text
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self.post(token, note, {"MCP-Protocol-Version": version}))[0] == 202
        return headers

    async def legacy_call(
        self,
        token: str,
        tool: str = "echo",
        arguments: Mapping[str, Any] | None = None,
        *,
        capabilities: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """``initialize`` (declaring ``elicitation`` unless ``capabilities`` says otherwise) +
        ``notifications/initialized`` + ``tools/call`` as a 2025 client."""
        capabilities = {"elicitation": {}} if capabilities is None else capabilities
        await self.legacy_initialize(token, capabilities=capabilities)
        params = {"name": tool, "arguments": dict(arguments or {})}
        return await self.legacy(token, "tools/call", params, headers=headers)


class McpAt(McpTestClient):
    """The client of a gateway at ``url`` (e.g. a process), with its own session:
    ``async with McpAt(url) as client``."""

    def __init__(self, url: str) -> None:
        self._url = url

    @property
    def mcp_url(self) -> str:
        return self._url

    async def __aenter__(self) -> McpAt:
        self.session = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.session.close()
