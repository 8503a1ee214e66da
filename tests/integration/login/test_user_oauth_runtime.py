"""A connected person's upstream token at run time (issue 45, "Runtime"): refreshed ahead of
expiry with the rotated refresh token kept; an upstream 401 refreshes once, a second asks for
consent; ``invalid_grant`` drops the tokens and asks again; 403 ``insufficient_scope`` asks
for the union of scopes; a server that cannot refresh a lapsed token fails closed; a pushed
revocation of the caller's gateway token drops what the replica cached for them."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.login_stack import HttpBrowser, sign_in
from tests.support.user_oauth_stack import (
    ADMIN_TOKEN,
    CLIENT_ID,
    CONSENT_KEY,
    UPSTREAM_USERS,
    URL_ELICITATION,
    WHOAMI,
    UserOAuthStack,
    connect,
    connected,
)


@pytest.fixture
async def stack(stack: UserOAuthStack) -> UserOAuthStack:
    """The stack of conftest.py with alice connected (as the service's first person)."""
    await connected(stack, "alice")
    return stack


def result(answer: tuple[int, dict[str, str], str]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(answer[2])["result"]
    return body


def refresh_tokens(stack: UserOAuthStack) -> list[Any]:
    """The refresh tokens the service's server issued to the gateway's client (one per grant
    and one per refresh: rotation)."""
    return [
        t
        for t in stack.upstream.store.tokens.values()
        if t.kind == "refresh_token" and t.client_id == CLIENT_ID
    ]


async def expire(stack: UserOAuthStack, sub: str = "alice") -> None:
    """The person's access token lapses (its record says so)."""
    store, owner = stack.user.store, stack.owner(sub)
    stored = await store.get(owner, "accounts")
    assert stored is not None
    lapsed = replace(stored.record, expires_at=time.time() - 1)
    assert await store.put(owner, lapsed, expect=stored.generation) is not None


def audit(tmp_path: Path, event: str) -> list[dict[str, Any]]:
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == event]


async def test_a_lapsed_token_is_refreshed_once_and_the_rotated_refresh_token_kept(
    stack: UserOAuthStack, tmp_path: Path
) -> None:
    before = await stack.record()
    assert before is not None and len(refresh_tokens(stack)) == 1
    await expire(stack)
    answer = result(await stack.stack.call(stack.token(), WHOAMI))
    assert answer["structuredContent"]["sub"] == UPSTREAM_USERS[0]
    after = await stack.record()
    assert after is not None and after.expires_at > time.time()
    assert after.access_token != before.access_token
    assert after.refresh_token != before.refresh_token  # rotated, and kept
    assert len(refresh_tokens(stack)) == 2 and stack.user.refreshes == 1
    assert stack.accounts.calls[-1].token == after.access_token
    events = audit(tmp_path, "upstream_token_refreshed")
    assert events and events[-1]["backend"] == "accounts" and events[-1]["subject"] == "alice"
    # Still fresh: no more refreshes.
    await stack.stack.call(stack.token(), WHOAMI)
    assert stack.user.refreshes == 1


async def test_an_upstream_401_refreshes_once_and_the_retry_goes_through(
    stack: UserOAuthStack,
) -> None:
    stack.accounts.refuse = 1
    answer = result(await stack.stack.call(stack.token(), WHOAMI))
    assert answer.get("isError") is not True
    assert answer["structuredContent"]["sub"] == UPSTREAM_USERS[0]
    assert stack.user.refreshes == 1


async def test_a_second_401_asks_for_consent_and_drops_the_tokens(stack: UserOAuthStack) -> None:
    stack.accounts.refuse = 2
    answer = result(await stack.stack.call(stack.token(), WHOAMI, capabilities=URL_ELICITATION))
    assert answer["resultType"] == "input_required"
    assert "no longer accepted" in answer["inputRequests"][CONSENT_KEY]["params"]["message"]
    record = await stack.record()
    assert record is not None and record.state(time.time()) == "reconnect_required"
    assert record.access_token is None and record.refresh_token is None


async def test_invalid_grant_drops_the_tokens_and_asks_again(stack: UserOAuthStack) -> None:
    before = await stack.record()
    assert before is not None
    for token in refresh_tokens(stack):  # the person revoked the grant at the service
        token.revoked = True
    await expire(stack)
    answer = result(await stack.stack.call(stack.token(), WHOAMI))
    assert answer["isError"] is True and "no longer accepted" in answer["content"][0]["text"]
    record = await stack.record()
    assert record is not None and record.state(time.time()) == "reconnect_required"
    assert record.refresh_token is None


async def test_insufficient_scope_asks_for_the_union_of_scopes(stack: UserOAuthStack) -> None:
    answer = result(
        await stack.stack.call(
            stack.token(), "accounts__notes_write", {"text": "hi"}, capabilities=URL_ELICITATION
        )
    )
    assert answer["resultType"] == "input_required"
    assert "more access" in answer["inputRequests"][CONSENT_KEY]["params"]["message"]
    link = answer["inputRequests"][CONSENT_KEY]["params"]["url"]
    async with aiohttp.ClientSession() as session:
        browser = HttpBrowser(session, stack.login.origin)
        await sign_in(browser, stack.login, "alice")
        _, _, page = await browser.get(link)
        assert "notes:read notes:write" in page
        await connect(browser, stack, link, person="alice", signed_in=True)
    answer = result(await stack.stack.call(stack.token(), "accounts__notes_write", {"text": "hi"}))
    assert answer.get("isError") is not True and answer["structuredContent"]["written"] is True
    record = await stack.record()
    assert record is not None and "notes:write" in record.scope.split()


@pytest.mark.row("upstream_token_unavailable")
async def test_a_lapsed_token_the_server_cannot_refresh_fails_closed(
    stack: UserOAuthStack,
) -> None:
    await expire(stack)
    await stack.upstream.stop()
    calls = len(stack.accounts.calls)
    status, headers, text = await stack.stack.call(stack.token(), WHOAMI, rid=3)
    assert status == 503 and int(headers["Retry-After"]) >= 1
    assert headers["Cache-Control"] == "no-store"
    assert json.loads(text)["error"] == "upstream_token_unavailable"
    assert len(stack.accounts.calls) == calls  # nothing went upstream


async def test_a_pushed_revocation_drops_what_the_replica_cached_for_the_person(
    stack: UserOAuthStack,
) -> None:
    token = stack.token()
    await stack.stack.call(token, WHOAMI)
    assert len(stack.user) == 1
    url = stack.stack.server.ops_url + "/admin/revoke"
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Content-Type": "application/json"}
    async with stack.stack.session.post(url, json={"token": token}, headers=headers) as response:
        assert response.status == 200, await response.text()
    assert len(stack.user) == 0
    assert (await stack.stack.call(token, WHOAMI))[0] == 401
    # With a new gateway token the person's upstream use resumes (the record is kept).
    answer = result(await stack.stack.call(stack.token(), WHOAMI))
    assert answer["structuredContent"]["sub"] == UPSTREAM_USERS[0]


async def test_listing_tools_never_waits_on_a_persons_refresh(stack: UserOAuthStack) -> None:
    await expire(stack)
    await stack.upstream.stop()
    status, _, text = await stack.stack.modern(stack.token(), "tools/list", {})
    assert status == 200 and len(json.loads(text)["result"]["tools"]) == 2
    assert stack.user.refreshes == 0
