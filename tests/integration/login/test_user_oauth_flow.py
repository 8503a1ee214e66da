"""Per-user upstream authorization through HTTP (issue 45): a ``user_oauth`` backend whose service
accepts only a token its own authorization server issued to a person.

A caller who has not connected gets the way to connect in the form their client can follow
(2026-07-28 URL elicitation in an input-required result; 2025-11-25 ``-32042``; a tool error
pointing to the account page otherwise); the person opens the link, signs in at the gateway's
issuer, consents at the service's server, and the retried call carries the token that server
issued to that person, to that backend only."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.live_stack import ServerFactory
from tests.support.login_stack import HttpBrowser
from tests.support.user_oauth_stack import (
    CATALOG_TOKEN,
    CONSENT_KEY,
    UPSTREAM_USERS,
    URL_ELICITATION,
    UserOAuthStack,
    connect,
    user_oauth_stack,
)


@pytest.fixture
async def stack(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[UserOAuthStack]:
    async with user_oauth_stack(tmp_path, aiohttp_server, monkeypatch) as running:
        yield running


@pytest.fixture
async def browser(stack: UserOAuthStack) -> AsyncIterator[HttpBrowser]:
    async with aiohttp.ClientSession() as session:
        yield HttpBrowser(session, stack.login.origin)


def result_of(text: str) -> dict[str, Any]:
    body = json.loads(text)
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


async def test_a_url_elicitation_connects_the_person_and_the_retry_carries_their_token(
    stack: UserOAuthStack, browser: HttpBrowser
) -> None:
    token = stack.token("alice")
    status, _, text = await stack.stack.call(
        token, "accounts__whoami", capabilities=URL_ELICITATION
    )
    assert status == 200
    first = result_of(text)
    assert first["resultType"] == "input_required"
    request = first["inputRequests"][CONSENT_KEY]
    assert request["method"] == "elicitation/create"
    params = request["params"]
    assert params["mode"] == "url"
    link = params["url"]
    assert link.startswith(stack.login.url("/connect/"))
    assert "alice" not in link  # no identity, no credential in the URL
    assert not stack.accounts.calls  # nothing went upstream
    page = await connect(browser, stack, link, person="alice", upstream_person=UPSTREAM_USERS[1])
    assert "is connected" in page
    retried = await stack.stack.modern(
        token,
        "tools/call",
        {
            "name": "accounts__whoami",
            "arguments": {},
            "requestState": first["requestState"],
            "inputResponses": {CONSENT_KEY: {"action": "accept"}},
        },
        capabilities=URL_ELICITATION,
    )
    assert retried[0] == 200, retried[2]
    done = result_of(retried[2])
    assert done["resultType"] == "complete", done
    assert done["structuredContent"]["sub"] == UPSTREAM_USERS[1]
    call = stack.accounts.calls[-1]
    assert call.subject == UPSTREAM_USERS[1] and call.token != CATALOG_TOKEN
    assert call.token not in retried[2] and call.token not in page
