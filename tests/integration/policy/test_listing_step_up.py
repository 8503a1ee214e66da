"""Policy ``listing: step_up``: tools a caller could unlock with more scopes are listed.

MCP Inspector (and other clients) call only listed tools, so with the default listing they never
reach the 403 step-up challenge. With ``listing: step_up`` such tools are listed and the call
gets the step-up 403; tools hidden by ``deny``, ``clients`` or ``subjects`` (or without a rule)
stay hidden. Real issuer, real upstream, production wiring.
"""

from __future__ import annotations

import json

import pytest

from gateway.errors import FORBIDDEN_CODE
from tests.support.live_stack import LiveStack, MakeStack
from tests.support.upstreams import ModernUpstream, echo_tool

TOOLS = ["echo", "report", "secret", "ops_only", "staff_only", "unruled"]


def policy(listing: str | None) -> str:
    head = "version: 1\nbaseline_scopes: [mcp:access]\n"
    if listing is not None:
        head += f"listing: {listing}\n"
    return head + (
        "tools:\n"
        "  echo: {scopes: []}\n"
        "  report: {scopes: [reports:read]}\n"
        "  secret: {deny: true}\n"
        "  ops_only: {scopes: [], clients: [ops-console]}\n"
        "  staff_only: {scopes: [], subjects: ['staff-*']}\n"
    )


async def listed(stack: LiveStack, token: str) -> set[str]:
    status, _, text = await stack.modern(token, "tools/list")
    assert status == 200, text
    return {tool["name"] for tool in json.loads(text)["result"]["tools"]}


@pytest.mark.row("tool_insufficient_scope")
async def test_step_up_lists_unlockable_tools_and_the_call_gets_the_step_up_403(
    make_stack: MakeStack,
) -> None:
    upstream = ModernUpstream(tools=[echo_tool(name) for name in TOOLS])
    async with make_stack(upstream=upstream, policy=policy("step_up")) as stack:
        token = stack.token(scopes="mcp:access")
        assert await listed(stack, token) == {"echo", "report"}
        status, headers, text = await stack.call(token, "report", rid=9)
        assert status == 403
        assert 'scope="mcp:access reports:read"' in headers["WWW-Authenticate"]
        assert json.loads(text)["error"]["code"] == FORBIDDEN_CODE
        # Hidden stays hidden: a denied or client-restricted tool is still "unknown".
        for name in ("secret", "ops_only", "staff_only", "unruled"):
            status, _, text = await stack.call(token, name)
            assert status == 400 and json.loads(text)["error"]["code"] == -32602, name
        # With the scope, the same listing and a successful call.
        granted = stack.token(scopes="mcp:access reports:read")
        assert await listed(stack, granted) == {"echo", "report"}
        status, _, text = await stack.call(granted, "report")
        assert status == 200, text
    assert [c.json["params"]["name"] for c in upstream.calls("tools/call")] == ["report"]


@pytest.mark.parametrize("listing", [None, "allowed"])
async def test_the_default_lists_only_callable_tools(
    make_stack: MakeStack,
    listing: str | None,
) -> None:
    upstream = ModernUpstream(tools=[echo_tool(name) for name in TOOLS])
    async with make_stack(upstream=upstream, policy=policy(listing)) as stack:
        assert await listed(stack, stack.token(scopes="mcp:access")) == {"echo"}
