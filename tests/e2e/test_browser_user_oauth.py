"""Per-user upstream authorization end to end (issue 45, "Done when"): the official ``mcp`` SDK
client calls a tool of a ``user_oauth`` backend through the production gateway, and a real
browser (Debian's Chromium, driven by playwright: :mod:`tests.support.chromium`) is the person.

* 2026-07-28 with URL elicitation declared: the SDK hands the URL elicitation to its callback;
  the person opens the URL, signs in at the gateway's issuer, consents at the service's own
  authorization server (a second development issuer with people of its own), returns; the
  callback accepts and the SDK's retry succeeds with the token that server issued to that person.
* 2025-11-25: the SDK raises the ``-32042`` error carrying the URL; the person opens it and
  consents; the call made again succeeds.
* A client without URL elicitation: the tool error names the account page; the person connects
  there; the call made again succeeds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.support.chromium import needs_chromium
from tests.support.live_stack import MakeStack
from tests.support.user_oauth_stack import UPSTREAM_USERS, UserOAuthStack, user_oauth_stack

pytestmark = needs_chromium

WHOAMI = "accounts__whoami"


@pytest.fixture
async def stack(make_stack: MakeStack) -> AsyncIterator[UserOAuthStack]:
    async with make_stack.of(user_oauth_stack) as running:
        yield running


async def sign_in_as(page: Any, user: str) -> None:
    """On a development issuer's sign-in page (the gateway's or the service's): choose
    ``user``, sign in."""
    await page.wait_for_selector("text=choose who you are")
    await page.check(f"input[name=signin_user][value={user}]")
    await page.click("button[value=yes]")


async def consent_in_the_browser(
    browser: Any,
    stack: UserOAuthStack,
    url: str,
    *,
    person: str,
    upstream: str,
    signed_in: bool = False,
) -> None:
    """The person opens a consent link, signs in at the gateway's issuer (unless ``signed_in``),
    presses Connect, signs in at the service."""
    page = await browser.new_page()
    await page.goto(url)
    if not signed_in:
        await sign_in_as(page, person)
        await page.wait_for_url(url)
    assert f"Signed in as {person}" in await page.inner_text("p.who")
    await page.click("#connect")
    await sign_in_as(page, upstream)  # at the service's own authorization server
    await page.wait_for_selector("text=is connected")
    assert stack.login.url("/oauth/callback") in page.url
    await page.close()


def sdk(stack: UserOAuthStack, sub: str, mode: str = "auto", elicit: Any = None) -> Any:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {stack.token(sub)}"})
    callbacks = {"elicitation_callback": elicit} if elicit is not None else {}
    client = Client(
        streamable_http_client(stack.stack.mcp_url, http_client=http), mode=mode, **callbacks
    )
    return http, client


def subject_of(result: types.CallToolResult) -> Any:
    assert result.is_error is not True, result
    assert result.structured_content is not None
    return result.structured_content["sub"]


async def test_the_sdk_follows_a_url_elicitation_and_the_retry_carries_the_persons_token(
    stack: UserOAuthStack, browser: Any
) -> None:
    seen: list[types.ElicitRequestURLParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        seen.append(params)
        await consent_in_the_browser(
            browser, stack, params.url, person="alice", upstream=UPSTREAM_USERS[1]
        )
        return types.ElicitResult(action="accept")

    http, client = sdk(stack, "alice", elicit=elicit)
    async with http, client as session:
        result = await session.call_tool(WHOAMI, {})
        again = await session.call_tool(WHOAMI, {})
    assert subject_of(result) == UPSTREAM_USERS[1] == subject_of(again)
    (asked,) = seen  # one consent, then the stored token serves every call
    assert asked.url.startswith(stack.login.url("/connect/"))
    call = stack.accounts.calls[-1]
    assert call.subject == UPSTREAM_USERS[1]
    record = await stack.record("alice")
    assert record is not None and record.access_token == call.token


async def test_a_2025_11_25_client_gets_the_url_in_error_32042(
    stack: UserOAuthStack, browser: Any
) -> None:
    http, client = sdk(stack, "bob", mode="legacy")
    async with http, client as session:
        assert session.session.protocol_version == "2025-11-25"
        with pytest.raises(MCPError) as caught:
            await session.call_tool(WHOAMI, {})
        assert caught.value.error.code == -32042
        data = caught.value.error.data
        assert isinstance(data, dict)
        (elicitation,) = data["elicitations"]
        await consent_in_the_browser(
            browser, stack, elicitation["url"], person="bob", upstream=UPSTREAM_USERS[0]
        )
        result = await session.call_tool(WHOAMI, {})
    assert subject_of(result) == UPSTREAM_USERS[0]


async def test_a_client_without_url_elicitation_is_sent_to_the_account_page(
    stack: UserOAuthStack, browser: Any
) -> None:
    http, client = sdk(stack, "carol")  # no elicitation callback: no elicitation declared
    async with http, client as session:
        refused = await session.call_tool(WHOAMI, {})
        assert refused.is_error is True
        block = refused.content[0]
        assert isinstance(block, types.TextContent)
        account = stack.login.url("/account")
        assert account in block.text
        page = await browser.new_page()
        await page.goto(account)
        await sign_in_as(page, "carol")
        await page.wait_for_url(account)
        assert "not connected" in await page.inner_text("#backend-accounts")
        await page.click("#backend-accounts button[value=connect]")
        await page.wait_for_url(stack.login.url("/connect/") + "*")
        await consent_in_the_browser(
            browser, stack, page.url, person="carol", upstream=UPSTREAM_USERS[0], signed_in=True
        )
        await page.goto(account)
        assert "connected" in await page.inner_text("#backend-accounts .state")
        result = await session.call_tool(WHOAMI, {})
    assert subject_of(result) == UPSTREAM_USERS[0]
