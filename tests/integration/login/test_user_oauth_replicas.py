"""Per-user upstream authorization on two replicas sharing a real redis-server (issue 45, "Done
when"): a person connects at one replica and calls at the other; twenty concurrent calls at the
token's expiry, on both replicas, make exactly one refresh request upstream; the rotated refresh
token is the one kept; one person's token never serves another's call, on either replica; a
disconnect at one replica ends the use at the other at once."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from tests.support.login_stack import HttpBrowser, hidden_fields, sign_in
from tests.support.user_oauth_stack import (
    CLIENT_ID,
    UPSTREAM_USERS,
    WHOAMI,
    UserOAuthStack,
    connect,
    connected,
    consent_link,
    user_oauth_stack,
)


@pytest.fixture
async def replicas(
    places: tuple[dict[str, Any], dict[str, Any]],
) -> AsyncIterator[tuple[UserOAuthStack, UserOAuthStack]]:
    """The second replica shares the first's service and its authorization server."""
    first, second = places
    async with (
        user_oauth_stack(**first) as a,
        user_oauth_stack(**second, upstream=a.upstream, accounts=a.accounts) as b,
    ):
        yield a, b


async def call(stack: UserOAuthStack, token: str, **kw: Any) -> dict[str, Any]:
    _, _, text = await stack.stack.call(token, WHOAMI, **kw)
    assert "result" in json.loads(text), text
    result: dict[str, Any] = json.loads(text)["result"]
    return result


def refresh_tokens(stack: UserOAuthStack) -> list[Any]:
    return [
        t
        for t in stack.upstream.store.tokens.values()
        if t.kind == "refresh_token" and t.client_id == CLIENT_ID
    ]


async def expire(stack: UserOAuthStack, sub: str) -> None:
    store, owner = stack.user.store, stack.owner(sub)
    stored = await store.get(owner, "accounts")
    assert stored is not None
    lapsed = replace(stored.record, expires_at=time.time() - 1)
    assert await store.put(owner, lapsed, expect=stored.generation) is not None


async def until_empty(stack: UserOAuthStack) -> None:
    """A readiness poll: the replica heard the change on the store's channel."""
    deadline = time.monotonic() + 5
    while len(stack.user):
        assert time.monotonic() < deadline, "the change never reached the replica"
        await asyncio.sleep(0.02)


async def test_consent_on_one_replica_serves_calls_on_the_other_and_refreshes_once(
    replicas: tuple[UserOAuthStack, UserOAuthStack],
) -> None:
    a, b = replicas
    await connected(a, "alice", UPSTREAM_USERS[0])
    await connected(a, "bob", UPSTREAM_USERS[1])
    alice, bob = a.token("alice"), a.token("bob")
    assert (await call(b, alice))["structuredContent"]["sub"] == UPSTREAM_USERS[0]
    assert (await call(b, bob))["structuredContent"]["sub"] == UPSTREAM_USERS[1]
    assert (await call(a, bob))["structuredContent"]["sub"] == UPSTREAM_USERS[1]
    # Twenty concurrent calls at the expiry of Alice's token, half at each replica.
    await expire(a, "alice")
    before = len(refresh_tokens(a))
    answers = await asyncio.gather(
        *(call(a if i % 2 else b, alice) for i in range(20)), call(b, bob), call(a, bob)
    )
    for answer in answers[:20]:
        assert answer["structuredContent"]["sub"] == UPSTREAM_USERS[0], answer
    assert [answer["structuredContent"]["sub"] for answer in answers[20:]] == [
        UPSTREAM_USERS[1]
    ] * 2
    assert len(refresh_tokens(a)) == before + 1  # exactly one refresh request upstream
    assert a.user.refreshes + b.user.refreshes == 1
    # The rotated refresh token is the one kept, and the server still honours it.
    record = await b.record("alice")
    assert record is not None and record.refresh_token is not None
    current = a.upstream.store.tokens[record.refresh_token]
    assert not current.revoked
    await expire(b, "alice")
    assert (await call(b, alice))["structuredContent"]["sub"] == UPSTREAM_USERS[0]
    assert len(refresh_tokens(a)) == before + 2


async def test_one_persons_token_never_serves_another_on_either_replica(
    replicas: tuple[UserOAuthStack, UserOAuthStack],
) -> None:
    a, b = replicas
    await connected(a, "alice", UPSTREAM_USERS[0])
    for replica in (a, b):
        answer = await call(replica, replica.token("alice"))
        assert answer["structuredContent"]["sub"] == UPSTREAM_USERS[0]
    assert len(a.user) == 1 and len(b.user) == 1  # Alice's token held on both replicas
    upstream_calls = len(a.accounts.calls)
    for replica in (a, b):  # Bob has connected nothing: asked to, on either replica
        answer = await call(replica, replica.token("bob"))
        assert answer["isError"] is True and "not connected" in answer["content"][0]["text"]
    assert len(a.accounts.calls) == upstream_calls  # nothing went upstream for Bob
    # Bob connects through a link replica b handed out (its pages answer at the shared
    # public origin); then each person's calls, at either replica, carry their own token.
    link = await consent_link(b, "bob")
    async with aiohttp.ClientSession() as session:
        browser = HttpBrowser(session, a.login.origin)
        await connect(browser, a, link, person="bob", upstream_person=UPSTREAM_USERS[1])
    for replica in (b, a):
        for sub, upstream in (("bob", 1), ("alice", 0)):
            answer = await call(replica, replica.token(sub))
            assert answer["structuredContent"]["sub"] == UPSTREAM_USERS[upstream]
    alice, bob = await b.record("alice"), await a.record("bob")
    assert alice is not None and bob is not None
    carried = {
        person: {c.token for c in a.accounts.calls if c.subject == person}
        for person in UPSTREAM_USERS
    }
    assert carried == {
        UPSTREAM_USERS[0]: {alice.access_token},
        UPSTREAM_USERS[1]: {bob.access_token},
    }


async def test_a_disconnect_at_one_replica_ends_the_use_at_the_other(
    replicas: tuple[UserOAuthStack, UserOAuthStack],
) -> None:
    a, b = replicas
    await connected(a, "alice", UPSTREAM_USERS[0])
    token = a.token("alice")
    assert (await call(b, token))["structuredContent"]["sub"] == UPSTREAM_USERS[0]
    assert len(b.user) == 1  # replica b keeps the record in memory
    async with aiohttp.ClientSession() as session:
        browser = HttpBrowser(session, a.login.origin)
        await sign_in(browser, a.login, "alice")
        _, _, page = await browser.get(a.login.url("/account"))
        form = {"csrf": hidden_fields(page)["csrf"], "backend": "accounts"}
        status, _, _ = await browser.post(a.login.url("/connections/disconnect"), form)
        assert status == 303
    await until_empty(b)
    answer = await call(b, token)
    assert answer["isError"] is True and "not connected" in answer["content"][0]["text"]
