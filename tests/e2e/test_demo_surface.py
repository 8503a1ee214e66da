"""End to end: the demo's prompts, resources, template and completion with the official SDK.

``mcp-gateway demo``'s backend offers a prompt with arguments, a text and a blob resource, a
template whose variable completes, and a prompt kept for the admin scope; the demo policy
governs them. The demo has two backends, so its resource URIs are in the gateway's
``mcp-gw://notes/...`` form. Both eras, the reader token, through the production gateway.
"""

from __future__ import annotations

import asyncio
import base64

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import ResourceTemplateReference

from gateway.demo.stack import DemoStack
from gateway.dev.demo_surface import LOGO_PNG
from gateway.errors import FORBIDDEN_CODE
from tests.support.sdk_stack import sdk_session


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_reader_uses_the_demo_prompts_and_resources(
    demo_stack: DemoStack, mode: str
) -> None:
    token = demo_stack.tokens["reader"]
    async with sdk_session(demo_stack.mcp_url, token, mode) as client:
        prompts = await client.list_prompts()
        assert [p.name for p in prompts.prompts] == ["summarize_notes"]  # admin_report: step-up
        got = await client.get_prompt("summarize_notes", {"topic": "the roadmap"})
        assert "the roadmap" in got.messages[0].content.text  # type: ignore[union-attr]
        resources = await client.list_resources()
        assert sorted(str(r.uri) for r in resources.resources) == [
            "mcp-gw://notes/demo://images/logo.png",
            "mcp-gw://notes/demo://notes/latest",
            "mcp-gw://notes/demo://notes/readme",
        ]
        logo = await client.read_resource("mcp-gw://notes/demo://images/logo.png")
        assert base64.b64decode(logo.contents[0].blob) == LOGO_PNG  # type: ignore[union-attr]
        page = await client.read_resource("mcp-gw://notes/demo://notes/faq")
        assert page.contents[0].text.startswith("# Faq")  # type: ignore[union-attr]
        done = await client.complete(
            ResourceTemplateReference(
                type="ref/resource", uri="mcp-gw://notes/demo://notes/{page}"
            ),
            {"name": "page", "value": "r"},
        )
        assert done.completion.values == ["roadmap"]
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("admin_report")
    assert caught.value.error.code == FORBIDDEN_CODE
    assert str(caught.value) == "Insufficient scope: requires admin"
    assert not demo_stack.backend.saw(token)


LATEST = "mcp-gw://notes/demo://notes/latest"


async def test_a_subscriber_is_told_when_the_newest_note_changes(demo_stack: DemoStack) -> None:
    """The demo's changing resource: a 2026-07-28 listen naming it hears every notes_add."""
    token = demo_stack.tokens["writer"]
    async with sdk_session(demo_stack.mcp_url, token) as client:
        async with client.listen(resource_subscriptions=[LATEST]) as sub:
            assert sub.honored.resource_subscriptions == [LATEST]
            await client.call_tool("notes_add", {"text": "subscribed"})
            async with asyncio.timeout(10):
                event = await sub.__anext__()
            assert event.uri == LATEST
        latest = await client.read_resource(LATEST)
        assert latest.contents[0].text.endswith(": subscribed")  # type: ignore[union-attr]
    assert not demo_stack.backend.saw(token)
