"""End to end: the demo's tools that ask the user, through the gateway, with the official SDK.

``mcp-gateway demo`` configures ``input_requests`` with a fresh key, and the demo backend's
``notes_compose`` (two elicitation rounds), ``notes_summarize`` (sampling) and
``workspace_roots`` (roots) answer with ``input_required`` results (MCP 2026-07-28
basic/patterns/mrtr.mdx). The SDK's client drives the rounds with its callbacks.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from gateway.backend.upstream.tool_results import CAPABILITY_TEXT
from gateway.demo.stack import DemoStack


class User:
    """What the person at the client answers, and what the client's model samples."""

    def __init__(self, note: str) -> None:
        self.note = note
        self.prompts: list[str] = []

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        message = getattr(params, "message", "")
        self.prompts.append(message)
        if message == "What should the note say?":
            return types.ElicitResult(action="accept", content={"text": self.note})
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.prompts.append("sampling")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="One note about the gateway."),
            model="demo-model",
        )

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.prompts.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///home/demo/work")])  # type: ignore[arg-type]


def client(stack: DemoStack, token: str, user: User | None, mode: str = "auto") -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    callbacks: dict[str, Any] = {}
    if user is not None:
        callbacks = {
            "elicitation_callback": user.elicit,
            "sampling_callback": user.sample,
            "list_roots_callback": user.roots,
        }
    return http, Client(
        streamable_http_client(stack.mcp_url, http_client=http), mode=mode, **callbacks
    )


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_writer_composes_a_note_in_two_rounds_and_a_reader_summarizes_it(
    demo_stack: DemoStack,
) -> None:
    writer = User("Input rounds work through the gateway")
    http, sdk = client(demo_stack, demo_stack.tokens["writer"], writer)
    async with http, sdk as session:
        composed = await session.call_tool("notes_compose", {})
        listed = await session.call_tool("notes_list", {})
    assert text_of(composed) == "Added note #1."
    assert writer.prompts == [
        "What should the note say?",
        'Add the note "Input rounds work through the gateway"?',
    ]
    assert "Input rounds work through the gateway" in text_of(listed)

    reader = User("unused")
    http, sdk = client(demo_stack, demo_stack.tokens["reader"], reader)
    async with http, sdk as session:
        summary = await session.call_tool("notes_summarize", {})
        roots = await session.call_tool("workspace_roots", {})
    assert text_of(summary) == "Summary: One note about the gateway."
    assert text_of(roots) == "file:///home/demo/work"
    assert reader.prompts == ["sampling", "roots"]
    # The backend's own signed state went back to it; the gateway's envelope never did.
    calls = [r for r in demo_stack.backend.received if b'"requestState"' in r.body]
    assert len(calls) == 4  # two for notes_compose, one each for the others
    assert all(b'"requestState":"ey' in r.body for r in calls)


async def test_a_client_without_the_capability_gets_32021_from_the_sdk(
    demo_stack: DemoStack,
) -> None:
    http, sdk = client(demo_stack, demo_stack.tokens["reader"], None)
    async with http, sdk as session:
        with pytest.raises(MCPError) as caught:
            await session.call_tool("workspace_roots", {})
    assert caught.value.error.code == -32021
    assert str(caught.value) == "Missing required client capability: roots"


async def test_a_legacy_client_gets_a_tool_error_it_can_show(demo_stack: DemoStack) -> None:
    http, sdk = client(demo_stack, demo_stack.tokens["writer"], User("x"), mode="legacy")
    async with http, sdk as session:
        assert session.session.protocol_version == "2025-11-25"
        result = await session.call_tool("notes_compose", {})
    assert result.is_error is True
    assert text_of(result) == CAPABILITY_TEXT
    assert demo_stack.backend.tools.notes == []
