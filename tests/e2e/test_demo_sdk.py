"""End to end: the official ``mcp`` Python SDK against the demo stack, modern and legacy eras.

Acceptance (a) of issue 7: with a reader token, ``tools/list`` shows only reader tools, a reader
tool call succeeds, and a writer tool call is refused with 403 ``insufficient_scope`` naming the
scope it needs. The client's token never reaches the backend.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from gateway.demo.stack import DemoStack
from gateway.errors import FORBIDDEN_CODE, UNAUTHORIZED_CODE
from tests.support.demo_stack import (
    READER_TOOLS,
    legacy_headers,
    modern_body,
    modern_headers,
    parse_challenge,
)
from tests.support.dev_http import http_client
from tests.support.sdk_stack import sdk_session

MODES = pytest.mark.parametrize(
    ("mode", "version"),
    [("auto", "2026-07-28"), ("legacy", "2025-11-25")],
    ids=["modern (auto: server/discover)", "legacy (initialize)"],
)


@MODES
async def test_a_reader_sees_only_reader_tools_and_can_call_one(
    demo_stack: DemoStack, mode: str, version: str
) -> None:
    token = demo_stack.tokens["reader"]
    async with sdk_session(demo_stack.mcp_url, token, mode) as client:
        assert client.session.protocol_version == version
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == READER_TOOLS
        result = await client.call_tool("echo", {"text": "hello through the gateway"})
        assert result.is_error is False
        assert result.content[0].text == "hello through the gateway"  # type: ignore[union-attr]
        notes = await client.call_tool("notes_list", {})
        assert notes.is_error is False
    assert demo_stack.backend.tools.calls["echo"] == 1
    # Token passthrough is forbidden: the backend only ever sees its own service credential.
    assert not demo_stack.backend.saw(token)
    assert all(
        r.header("Authorization") == f"Bearer {demo_stack.backend.service_token}"
        for r in demo_stack.backend.received
    )


@MODES
async def test_a_reader_calling_a_writer_tool_is_refused_by_the_sdk(
    demo_stack: DemoStack, mode: str, version: str
) -> None:
    token = demo_stack.tokens["reader"]
    async with sdk_session(demo_stack.mcp_url, token, mode) as client:
        # The Python SDK hides the HTTP status (client-behaviour.md §5) but shows a JSON-RPC
        # error body: the user reads which scope is missing (issue 11 item 4).
        with pytest.raises(MCPError) as caught:
            await client.call_tool("notes_add", {"text": "not allowed"})
    assert "notes_add" not in demo_stack.backend.tools.calls
    assert str(caught.value) == "Insufficient scope: requires notes:write"
    assert caught.value.error.code == FORBIDDEN_CODE
    assert caught.value.error.data == {
        "required_scopes": ["mcp:access", "notes:write"],
        "missing_scopes": ["notes:write"],
    }


@MODES
async def test_a_refused_token_reaches_the_sdk_user_as_a_readable_error(
    demo_stack: DemoStack, mode: str, version: str
) -> None:
    bogus = "not-a-token-the-issuer-knows"
    # The SDK raises from inside its task group: the MCPError may arrive wrapped in a group.
    with pytest.raises((MCPError, BaseExceptionGroup)) as caught:
        async with sdk_session(demo_stack.mcp_url, bogus, mode):
            pass  # the handshake itself is refused
    error = _mcp_error(caught.value)
    assert str(error) == "Invalid or expired access token"
    assert error.error.code == UNAUTHORIZED_CODE
    assert error.error.data == {"required_scopes": ["mcp:access"]}
    assert bogus not in str(error)


def _mcp_error(exc: BaseException) -> MCPError:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    assert isinstance(exc, MCPError), repr(exc)
    return exc


@pytest.mark.parametrize(
    "era",
    ["modern", "legacy"],
    ids=["modern tools/call", "legacy tools/call"],
)
async def test_a_writer_tool_call_with_a_reader_token_is_answered_403_with_the_scope(
    demo_stack: DemoStack, era: str
) -> None:
    token = demo_stack.tokens["reader"]
    body: dict[str, Any]
    if era == "modern":
        body = modern_body("tools/call", {"name": "notes_add", "arguments": {"text": "x"}})
        headers = modern_headers(token, "tools/call", "notes_add")
    else:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "notes_add", "arguments": {"text": "x"}},
        }
        headers = legacy_headers(token)
    async with http_client() as http:
        response = await http.post(demo_stack.mcp_url, json=body, headers=headers)
        await response.read()
    assert response.status == 403
    challenge = parse_challenge(response.headers["WWW-Authenticate"])
    assert challenge["error"] == "insufficient_scope"
    assert "notes:write" in challenge["scope"].split()
    assert "notes_add" not in demo_stack.backend.tools.calls


async def test_a_writer_token_adds_a_note_that_a_reader_then_lists(demo_stack: DemoStack) -> None:
    writer, reader = demo_stack.tokens["writer"], demo_stack.tokens["reader"]
    async with sdk_session(demo_stack.mcp_url, writer) as client:
        added = await client.call_tool("notes_add", {"text": "written via the gateway"})
        assert added.is_error is False
    async with sdk_session(demo_stack.mcp_url, reader) as client:
        listed = await client.call_tool("notes_list", {})
        assert "written via the gateway" in listed.content[0].text  # type: ignore[union-attr]
