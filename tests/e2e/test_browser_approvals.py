"""Human approval end to end (issue 46, "Done when"): the official ``mcp`` SDK client calls a
tool whose rule holds each call for approval, through the production gateway, and a real
browser (Debian's Chromium, driven by playwright: :mod:`tests.support.chromium`) is the person
who approves at the gateway's approval page.

* 2026-07-28 with URL elicitation declared, ``by: self``: the SDK hands the URL elicitation to
  its callback; the caller opens it, signs in at the gateway's issuer, reads the redacted
  preview, approves; the callback accepts and the SDK's retry runs the call, once.
* An approver set (``by: {claim: groups, value: payments}``): another person, whose sign-in
  carries the group, approves in their own browser.
* 2025-11-25: the SDK raises ``-32042`` with the page's URL; the caller approves; the call made
  again runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.support.approval_stack import ApprovalStack, approval_stack
from tests.support.chromium import chromium_context, needs_chromium
from tests.support.live_stack import ServerFactory

pytestmark = needs_chromium

ARGS = {"text": "drop table users", "secret": "hunter2-in-the-args"}


@pytest.fixture
async def stack(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ApprovalStack]:
    async with approval_stack(tmp_path, aiohttp_server, monkeypatch) as running:
        yield running


async def approve_in_a_browser(url: str, person: str, *, decision: str = "approve") -> str:
    """A fresh browser (no cookies): ``person`` opens the page, signs in, reads it, decides;
    the request page's text."""
    async with chromium_context() as browser:
        page = await browser.new_page()
        await page.goto(url)
        await page.wait_for_selector("text=choose who you are")
        await page.check(f"input[name=signin_user][value={person}]")
        await page.click("button[value=yes]")
        await page.wait_for_url(url)
        shown = await page.inner_text("body")
        await page.click(f"#{decision}")
        await page.wait_for_selector("#decided")
        return shown


def sdk(stack: ApprovalStack, sub: str, mode: str = "auto", elicit: Any = None) -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {stack.token(sub)}"})
    callbacks = {"elicitation_callback": elicit} if elicit is not None else {}
    client = Client(
        streamable_http_client(stack.login.stack.mcp_url, http_client=http), mode=mode, **callbacks
    )
    return http, client


def echoed(result: types.CallToolResult) -> Any:
    assert result.is_error is not True, result
    assert result.structured_content is not None
    return result.structured_content["echo"]


async def test_the_sdk_follows_the_url_elicitation_and_the_caller_approves_once(
    stack: ApprovalStack,
) -> None:
    shown: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        assert params.url.startswith(stack.login.url("/approve/"))
        shown.append(await approve_in_a_browser(params.url, "alice"))
        return types.ElicitResult(action="accept")

    http, client = sdk(stack, "alice", elicit=elicit)
    async with http, client as session:
        result = await session.call_tool("wipe", ARGS)
    assert echoed(result) == ARGS
    (page,) = shown
    assert "[redacted]" in page and "hunter2" not in page and "drop table users" in page
    assert "Preview SHA-256" in page
    assert stack.runs("wipe") == [ARGS]


async def test_an_approver_of_the_group_approves_another_persons_call(
    stack: ApprovalStack,
) -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        await approve_in_a_browser(params.url, "bob")  # bob's sign-in carries "payments"
        return types.ElicitResult(action="accept")

    http, client = sdk(stack, "alice", elicit=elicit)
    async with http, client as session:
        result = await session.call_tool("pay", {"text": "100 EUR"})
    assert echoed(result) == {"text": "100 EUR"}
    assert stack.runs("pay") == [{"text": "100 EUR"}]


async def test_a_2025_11_25_client_gets_the_page_in_error_32042(stack: ApprovalStack) -> None:
    http, client = sdk(stack, "carol", mode="legacy")
    async with http, client as session:
        assert session.session.protocol_version == "2025-11-25"
        with pytest.raises(MCPError) as caught:
            await session.call_tool("wipe", ARGS)
        assert caught.value.error.code == -32042
        data = caught.value.error.data
        assert isinstance(data, dict)
        (elicitation,) = data["elicitations"]
        assert stack.runs("wipe") == []
        await approve_in_a_browser(elicitation["url"], "carol")
        result = await session.call_tool("wipe", ARGS)
    assert echoed(result) == ARGS
    assert stack.runs("wipe") == [ARGS]
