"""The official ``mcp`` SDK 2.3.0 client, in modern and legacy mode, against the running front door.

An independent client implementation (httpx2 transport, its own JSON-RPC framing and result
models) connects with a static bearer header, lists tools and calls one, through real HTTP on
loopback. The backend, policy and authenticator are the in-process fakes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.gateway_harness import Gateway, start_gateway


@pytest.fixture
async def gateway(aiohttp_server: Any, aiohttp_client: Any) -> Gateway:
    return await start_gateway(aiohttp_server, aiohttp_client)


@asynccontextmanager
async def _client(gateway: Gateway, mode: str, token: str = "good") -> AsyncIterator[Client]:
    # The transport leaves a caller-provided httpx client open: close it here.
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        transport = streamable_http_client(gateway.url, http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy", "auto"])
async def test_the_sdk_client_lists_and_calls_a_tool(gateway: Gateway, mode: str) -> None:
    async with _client(gateway, mode) as client:
        listed = await client.list_tools()
        names = [tool.name for tool in listed.tools]
        assert "echo" in names and "search_docs" in names
        assert "admin_reset" not in names and "unlisted_tool" not in names
        region = next(tool for tool in listed.tools if tool.name == "region_lookup")
        assert region.input_schema["properties"]["region"]["type"] == "string"
        result = await client.call_tool("echo", {"text": "hello gateway"})
        assert result.is_error is False
        assert result.content[0].text == "hello gateway"  # type: ignore[union-attr]
    eras = {ctx.era for ctx in gateway.observer.finished if ctx.method == "tools/call"}
    assert eras == {"legacy" if mode == "legacy" else "modern"}
    # The backend never sees the client's token: only the principal established by auth.
    assert all(call.principal.subject == "alice" for call in gateway.backend.calls)


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_the_sdk_client_sees_a_failing_tool_as_a_tool_error(
    gateway: Gateway, mode: str
) -> None:
    async with _client(gateway, mode) as client:
        result = await client.call_tool("fail", {})
        assert result.is_error is True


async def test_the_sdk_client_calls_a_tool_with_an_x_mcp_header_parameter(
    gateway: Gateway,
) -> None:
    async with _client(gateway, "2026-07-28") as client:
        await client.list_tools()
        result = await client.call_tool("region_lookup", {"region": "eu-west"})
        assert result.is_error is False
    assert dict(gateway.backend.calls[-1].call.header_params) == {"Region": "eu-west"}
