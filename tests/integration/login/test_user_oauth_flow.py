"""Per-user upstream authorization through HTTP (issue 45): a ``user_oauth`` backend whose service
accepts only a token its own authorization server issued to a person.

A caller who has not connected gets the way to connect in the form their client can follow
(2026-07-28 URL elicitation in an input-required result; 2025-11-25 ``-32042``; a tool error
pointing to the account page otherwise); the person opens the link, signs in at the gateway's
issuer, consents at the service's server, and the retried call carries the token that server
issued to that person, to that backend only."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from tests.support.live_stack import MakeStack
from tests.support.login_stack import HttpBrowser, hidden_fields, sign_in
from tests.support.user_oauth_stack import (
    CATALOG_TOKEN,
    CONSENT_KEY,
    UPSTREAM_USERS,
    URL_ELICITATION,
    WHOAMI,
    UserOAuthStack,
    connect,
    user_oauth_stack,
)


def result_of(text: str) -> dict[str, Any]:
    body = json.loads(text)
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


async def retry(
    stack: UserOAuthStack, token: str, state: str, action: str = "accept"
) -> tuple[int, dict[str, str], str]:
    """The client's retry of a consent round (what the SDK sends after the elicitation)."""
    params = {
        "name": WHOAMI,
        "arguments": {},
        "requestState": state,
        "inputResponses": {CONSENT_KEY: {"action": action}},
    }
    return await stack.stack.modern(token, "tools/call", params, capabilities=URL_ELICITATION)


async def test_a_url_elicitation_connects_the_person_and_the_retry_carries_their_token(
    stack: UserOAuthStack, browser: HttpBrowser
) -> None:
    token = stack.token("alice")
    status, _, text = await stack.stack.call(token, WHOAMI, capabilities=URL_ELICITATION)
    assert status == 200
    first = result_of(text)
    assert first["resultType"] == "input_required"
    assert "ttlMs" not in first and "cacheScope" not in first  # caching.mdx: never cacheable
    request = first["inputRequests"][CONSENT_KEY]
    assert request["method"] == "elicitation/create"
    params = request["params"]
    assert params["mode"] == "url" and "accounts" in params["message"]
    link = params["url"]
    assert link.startswith(stack.login.url("/connect/"))
    assert "alice" not in link  # no identity, no credential in the URL
    assert not stack.accounts.calls  # nothing went upstream
    page = await connect(browser, stack, link, person="alice", upstream_person=UPSTREAM_USERS[1])
    assert "is connected" in page
    status, _, text = await retry(stack, token, first["requestState"])
    assert status == 200, text
    done = result_of(text)
    assert done["resultType"] == "complete", done
    assert done["structuredContent"]["sub"] == UPSTREAM_USERS[1]
    call = stack.accounts.calls[-1]
    assert call.subject == UPSTREAM_USERS[1] and call.token != CATALOG_TOKEN
    assert call.token not in text and call.token not in page
    # The next call needs no consent at all.
    status, _, text = await stack.stack.call(token, WHOAMI, capabilities=URL_ELICITATION)
    assert result_of(text)["structuredContent"]["sub"] == UPSTREAM_USERS[1]
    record = await stack.record("alice")
    assert record is not None and record.state(0) == "connected"
    assert record.server == stack.upstream.url and record.scope


async def test_a_retry_before_the_person_is_through_waits_for_the_connection(
    stack: UserOAuthStack, browser: HttpBrowser
) -> None:
    """A client retries as soon as the person agreed to open the link: the retry waits for the
    connection (the store's change, heard by the replica) and the call goes through."""
    token = stack.token("alice")
    first = result_of((await stack.stack.call(token, WHOAMI, capabilities=URL_ELICITATION))[2])
    waiting = asyncio.create_task(retry(stack, token, first["requestState"]))
    link = first["inputRequests"][CONSENT_KEY]["params"]["url"]
    await connect(browser, stack, link, person="alice")
    status, _, text = await asyncio.wait_for(waiting, 10)
    assert status == 200 and result_of(text)["structuredContent"]["sub"] == UPSTREAM_USERS[0]


async def test_a_retry_the_person_is_not_through_by_gets_another_link(
    make_stack: MakeStack,
) -> None:
    short = {"limits": {"request_deadline_s": 2}}  # the wait ends a second before the deadline
    async with make_stack.of(user_oauth_stack, gateway=short) as stack:
        token = stack.token("alice")
        first = result_of((await stack.stack.call(token, WHOAMI, capabilities=URL_ELICITATION))[2])
        again = result_of((await retry(stack, token, first["requestState"]))[2])
        assert again["resultType"] == "input_required"
        second_link = again["inputRequests"][CONSENT_KEY]["params"]["url"]
        assert second_link != first["inputRequests"][CONSENT_KEY]["params"]["url"]
        assert not stack.accounts.calls


async def test_a_declined_consent_is_a_tool_error_and_nothing_goes_upstream(
    stack: UserOAuthStack,
) -> None:
    token = stack.token("alice")
    first = result_of((await stack.stack.call(token, WHOAMI, capabilities=URL_ELICITATION))[2])
    for action in ("decline", "cancel"):
        done = result_of((await retry(stack, token, first["requestState"], action))[2])
        assert done["isError"] is True and "not accepted" in text_of(done)
    assert not stack.accounts.calls


@pytest.mark.row("url_elicitation_required")
async def test_a_2025_11_25_client_gets_the_url_elicitation_required_error(
    stack: UserOAuthStack, browser: HttpBrowser
) -> None:
    token = stack.token("bob")
    params = {"name": WHOAMI, "arguments": {}}
    status, headers, text = await stack.stack.legacy(
        token, "tools/call", params, rid=9, version="2025-11-25"
    )
    assert status == 200 and headers["Cache-Control"] == "no-store"
    error = json.loads(text)["error"]
    assert json.loads(text)["id"] == 9
    assert error["code"] == -32042
    (elicitation,) = error["data"]["elicitations"]
    assert elicitation["mode"] == "url" and elicitation["elicitationId"]
    assert elicitation["url"].startswith(stack.login.url("/connect/"))
    await connect(browser, stack, elicitation["url"], person="bob")
    status, _, text = await stack.stack.legacy(token, "tools/call", params, version="2025-11-25")
    assert result_of(text)["structuredContent"]["sub"] == UPSTREAM_USERS[0]


async def test_a_client_without_url_elicitation_is_sent_to_the_account_page(
    stack: UserOAuthStack, browser: HttpBrowser
) -> None:
    token = stack.token("carol")
    account = stack.login.url("/account")
    for capabilities in ({}, {"elicitation": {"form": {}}}):
        status, _, text = await stack.stack.call(token, WHOAMI, capabilities=capabilities)
        result = result_of(text)
        assert status == 200 and result["isError"] is True
        assert account in text_of(result) and "/connect/" not in text
    legacy = await stack.stack.legacy(token, "tools/call", {"name": WHOAMI, "arguments": {}})
    assert account in text_of(result_of(legacy[2]))  # 2025-06-18: the same tool error
    # The account page lists the backend, not connected; its Connect goes through a link.
    assert await sign_in(browser, stack.login, "carol", next_path="/gateway/account")
    status, _, page = await browser.get(account)
    assert status == 200 and 'id="backend-accounts"' in page and "not connected" in page
    status, headers, _ = await browser.post(
        stack.login.url("/connections/connect"),
        {"csrf": hidden_fields(page)["csrf"], "backend": "accounts", "do": "connect"},
    )
    assert status == 303 and headers["Location"].startswith(stack.login.url("/connect/"))
    link = headers["Location"]
    await connect(browser, stack, link, person="carol", signed_in=True)
    status, _, page = await browser.get(account)
    assert "Disconnect" in page and ">connected<" in page
    status, _, text = await stack.stack.call(token, WHOAMI)
    assert result_of(text)["structuredContent"]["sub"] == UPSTREAM_USERS[0]


async def test_disconnecting_at_the_account_page_deletes_the_tokens_at_once(
    stack: UserOAuthStack, browser: HttpBrowser
) -> None:
    token = stack.token("alice")
    first = result_of((await stack.stack.call(token, WHOAMI, capabilities=URL_ELICITATION))[2])
    link = first["inputRequests"][CONSENT_KEY]["params"]["url"]
    await connect(browser, stack, link, person="alice")
    assert result_of((await stack.stack.call(token, WHOAMI))[2]).get("isError") is not True
    status, _, page = await browser.get(stack.login.url("/account"))
    status, headers, _ = await browser.post(
        stack.login.url("/connections/disconnect"),
        {"csrf": hidden_fields(page)["csrf"], "backend": "accounts", "do": "disconnect"},
    )
    assert status == 303 and headers["Location"] == "/gateway/account"
    assert await stack.record("alice") is None
    again = result_of((await stack.stack.call(token, WHOAMI))[2])
    assert again["isError"] is True and "not connected" in text_of(again)


@pytest.mark.row("upstream_connection_required")
async def test_a_read_of_a_backend_the_caller_has_not_connected_names_the_account_page(
    stack: UserOAuthStack, browser: HttpBrowser
) -> None:
    token = stack.token("alice")
    status, headers, text = await stack.stack.modern(
        token, "resources/read", {"uri": "accounts://me"}, rid=4
    )
    assert status == 403 and "WWW-Authenticate" not in headers
    body = json.loads(text)
    assert body["id"] == 4 and body["error"]["code"] == -31403
    assert body["error"]["data"] == {
        "backend": "accounts",
        "reason": "missing",
        "account": stack.login.url("/account"),
    }
    assert not stack.accounts.calls
    # Once connected, the read carries the person's token.
    first = result_of((await stack.stack.call(token, WHOAMI, capabilities=URL_ELICITATION))[2])
    await connect(
        browser, stack, first["inputRequests"][CONSENT_KEY]["params"]["url"], person="alice"
    )
    status, _, text = await stack.stack.modern(token, "resources/read", {"uri": "accounts://me"})
    assert status == 200 and UPSTREAM_USERS[0] in text


async def test_the_catalog_is_served_whoever_is_connected(stack: UserOAuthStack) -> None:
    _, _, text = await stack.stack.modern(stack.token("carol"), "tools/list", {})
    names = {tool["name"] for tool in result_of(text)["tools"]}
    assert names == {WHOAMI, "accounts__notes_write"}
    assert stack.accounts.received
    assert all(
        r.header("Authorization") == f"Bearer {CATALOG_TOKEN}" for r in stack.accounts.received
    )


async def test_the_client_metadata_document_names_the_one_redirect_uri(
    stack: UserOAuthStack,
) -> None:
    url = stack.login.url("/oauth/client.json")
    async with stack.stack.session.get(url) as response:
        assert response.status == 200 and response.content_type == "application/json"
        assert "max-age" in response.headers["Cache-Control"]
        document = await response.json()
    assert document["client_id"] == url  # MUST be the document's URL exactly
    assert document["redirect_uris"] == [stack.login.url("/oauth/callback")]
    assert document["token_endpoint_auth_method"] == "none"
    assert set(document["grant_types"]) == {"authorization_code", "refresh_token"}


async def test_without_a_client_or_a_server_configured_both_are_found_and_it_works(
    make_stack: MakeStack,
) -> None:
    """The server from the service's RFC 9728 metadata, a client registered there dynamically
    (a public client: PKCE, no secret), and the whole consent."""
    bare = {"authorization_server": None, "client_id": None, "client_secret": None}
    async with (
        make_stack.of(user_oauth_stack, credential=bare) as stack,
        aiohttp.ClientSession() as session,
    ):
        browser = HttpBrowser(session, stack.login.origin)
        token = stack.token("alice")
        first = result_of((await stack.stack.call(token, WHOAMI, capabilities=URL_ELICITATION))[2])
        link = first["inputRequests"][CONSENT_KEY]["params"]["url"]
        await connect(browser, stack, link, person="alice")
        done = result_of((await retry(stack, token, first["requestState"]))[2])
        assert done["structuredContent"]["sub"] == UPSTREAM_USERS[0]
        record = await stack.record("alice")
        assert record is not None and record.client_id != "gateway-accounts"
        assert stack.upstream.store.clients[record.client_id].auth_method == "none"
