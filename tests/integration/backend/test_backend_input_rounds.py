"""UpstreamBackend and input rounds: what a retry sends upstream, and what it never sends.

MCP 2026-07-28 basic/patterns/mrtr.mdx. The front door opens the sealed state and hands the
backend a :class:`~gateway.seams.Resume`; the backend sends the upstream its own
``requestState`` and the checked ``inputResponses`` (canonical JSON), refuses a resume sealed
for another backend before any traffic, and never resumes on a legacy-era upstream.
"""

from __future__ import annotations

from typing import Any

import pytest

from gateway.backend.upstream.tool_results import FAILED_TEXT
from gateway.errors import InvalidRequestState
from gateway.seams import InputRequired, Resume, ToolCall
from tests.integration.backend.helpers import context, make_config, principal
from tests.support.input_upstream import InputUpstream, retries
from tests.support.live_stack import ServerFactory
from tests.support.upstreams import LegacyUpstream, echo_tool

ANSWER = {"confirm": {"action": "accept", "content": {"confirm": True}}}


def call_of(backend: Any, name: str, resume: Resume | None = None) -> ToolCall:
    tool = backend.catalog().get(name)
    assert tool is not None
    return ToolCall(
        tool=tool,
        arguments={"path": "/p"},
        era="modern",
        protocol_version="2026-07-28",
        client_capabilities={"elicitation": {}},
        resume=resume,
    )


async def test_a_round_comes_back_validated_and_the_retry_carries_the_upstreams_own_state(
    aiohttp_server: ServerFactory, backend_factory: Any
) -> None:
    upstream = InputUpstream()
    url = str((await aiohttp_server(upstream.app())).make_url("/mcp"))
    backend = await backend_factory(make_config(url))
    ctx = context()
    found = await backend.call_tool(call_of(backend, "confirm_delete"), principal(), ctx, 1e12)
    assert isinstance(found, InputRequired)
    assert (found.backend, found.state, list(found.requests)) == (
        "default",
        "up:confirm_delete:1",
        ["confirm"],
    )
    assert ctx.outcome == "input_required"
    resume = Resume(backend="default", state=found.state, responses=ANSWER, round=1)
    done = await backend.call_tool(
        call_of(backend, "confirm_delete", resume), principal(), context(), 1e12
    )
    assert done == {"content": [{"type": "text", "text": "Deleted /p"}], "isError": False}
    sent = upstream.tool_calls()[-1]
    assert sent.json["params"]["requestState"] == "up:confirm_delete:1"
    assert sent.json["params"]["inputResponses"] == ANSWER
    assert b'"inputResponses":{"confirm":{"action":"accept","content":{"confirm":true}}}' in (
        sent.body
    )  # canonical JSON, rebuilt by the gateway


@pytest.mark.row("invalid_request_state")
async def test_a_resume_sealed_for_another_backend_sends_nothing(
    aiohttp_server: ServerFactory, backend_factory: Any
) -> None:
    upstream = InputUpstream()
    url = str((await aiohttp_server(upstream.app())).make_url("/mcp"))
    backend = await backend_factory(make_config(url))
    resume = Resume(backend="tickets", state="up:confirm_delete:1", responses=ANSWER, round=1)
    with pytest.raises(InvalidRequestState) as refused:
        await backend.call_tool(
            call_of(backend, "confirm_delete", resume), principal(), context(), 1e12
        )
    assert refused.value.status_for("modern") == 400
    assert refused.value.wire_code == -32602
    assert refused.value.body_message() == "requestState does not match this request"
    assert retries(upstream) == []


async def test_a_legacy_era_upstream_never_gets_a_retry(
    aiohttp_server: ServerFactory, backend_factory: Any
) -> None:
    upstream = LegacyUpstream(tools=[echo_tool("confirm_delete")])
    url = str((await aiohttp_server(upstream.app())).make_url("/mcp"))
    backend = await backend_factory(make_config(url))
    resume = Resume(backend="default", state="s", responses=ANSWER, round=1)
    result = await backend.call_tool(
        call_of(backend, "confirm_delete", resume), principal(), context(), 1e12
    )
    assert result == {"content": [{"type": "text", "text": FAILED_TEXT}], "isError": True}
    assert upstream.calls("tools/call") == []
