"""Per-user upstream authorization under attack (issue 45, "Attacks refused, each a test").

The MCP specification's phishing rule for URL elicitation (2026-07-28 client/elicitation.mdx):
the person who completes the authorization must be the person the link was made for, whoever
opens (or is tricked into opening) the link or the server's answer. And as an OAuth client the
gateway checks the answer's ``iss`` before its code goes anywhere (RFC 9207 §2.4), binds the code
to its PKCE verifier and client, and stores a person's tokens under that person only."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import aiohttp
import pytest

from tests.support.live_stack import MakeStack
from tests.support.login_stack import HttpBrowser, authorize, csrf_of, hidden_fields, sign_in
from tests.support.user_oauth_stack import (
    UPSTREAM_USERS,
    WHOAMI,
    UserOAuthStack,
    connect,
    connected,
    consent_link,
    user_oauth_stack,
)


def events(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


async def start_authorization(browser: HttpBrowser, stack: UserOAuthStack, sub: str) -> str:
    """``sub`` signs in, opens a fresh link of theirs and presses Connect: the authorization
    request the gateway sends the browser to (not followed)."""
    link = await consent_link(stack, sub)
    await sign_in(browser, stack.login, sub, next_path=urlsplit(link).path)
    _, _, page = await browser.get(link)
    status, headers, _ = await browser.post(link, {"csrf": hidden_fields(page)["csrf"]})
    assert status == 303
    return str(headers["Location"])


def with_params(url: str, **changes: str | None) -> str:
    parts = urlsplit(url)
    params = {k: v[0] for k, v in parse_qs(parts.query).items()}
    for key, value in changes.items():
        if value is None:
            params.pop(key, None)
        else:
            params[key] = value
    return f"{parts.scheme}://{parts.netloc}{parts.path}?{urlencode(params)}"


def codes_redeemed(stack: UserOAuthStack) -> int:
    return sum(1 for code in stack.upstream.store.codes.values() if code.used)


async def test_a_link_opened_by_another_person_does_nothing_and_is_audited(
    stack: UserOAuthStack, browsers: tuple[HttpBrowser, HttpBrowser], tmp_path: Path
) -> None:
    alices_link = await consent_link(stack, "alice")
    bob = browsers[1]
    await sign_in(bob, stack.login, "bob", next_path=urlsplit(alices_link).path)
    status, _, page = await bob.get(alices_link)
    assert status == 403 and "started by another user" in page
    # Connect pressed with Bob's own valid form token: past the CSRF check, still not his.
    _, _, account = await bob.get(stack.login.url("/account"))
    status, headers, page = await bob.post(alices_link, {"csrf": csrf_of(account)})
    assert status == 403 and "started by another user" in page, page[:200]
    assert "Location" not in headers  # never sent on to the service's server
    assert await stack.record("alice") is None and await stack.record("bob") is None
    assert codes_redeemed(stack) == 0
    mismatches = [e for e in events(tmp_path) if e["event"] == "login_identity_mismatch"]
    assert len(mismatches) == 2 and {e["subject"] for e in mismatches} == {"bob"}
    assert {e["kind"] for e in mismatches} == {"connect"}
    # The link is still Alice's to use.
    await connect(browsers[0], stack, alices_link, person="alice")
    record = await stack.record("alice")
    assert record is not None and await stack.record("bob") is None


async def test_a_used_link_and_an_expired_link_are_not_found(
    stack: UserOAuthStack, browsers: tuple[HttpBrowser, HttpBrowser]
) -> None:
    browser = browsers[0]
    link = await consent_link(stack, "alice")
    await connect(browser, stack, link, person="alice")
    status, _, page = await browser.get(link)  # replayed
    assert status == 404 and "does not exist" in page
    stale = await consent_link(stack, "bob")
    await sign_in(browsers[1], stack.login, "bob")
    store = stack.login.surface.actions._store
    ahead = time.time() + 3600  # the link's lifetime (user_oauth.consent_ttl_s) has passed
    store._clock = lambda: ahead  # type: ignore[attr-defined]
    status, _, _ = await browsers[1].get(stale)
    assert status == 404


@pytest.mark.row("connect_state_invalid")
async def test_a_tampered_or_replayed_state_stores_nothing(
    stack: UserOAuthStack, browsers: tuple[HttpBrowser, HttpBrowser]
) -> None:
    browser = browsers[0]
    request = await start_authorization(browser, stack, "alice")
    answer = await authorize(browser, request, UPSTREAM_USERS[0])
    state = parse_qs(urlsplit(answer).query)["state"][0]
    tampered = with_params(answer, state=state[:-1] + ("A" if state[-1] != "A" else "B"))
    status, headers, page = await browser.get(tampered)
    assert status == 400 and "not started here" in page
    assert headers["Cache-Control"] == "no-store"
    status, _, _ = await browser.get(with_params(answer, state=None))
    assert status == 400
    assert await stack.record("alice") is None and codes_redeemed(stack) == 0
    status, _, _ = await browser.get(answer)  # the genuine answer still works, once
    assert status == 200 and await stack.record("alice") is not None
    status, _, page = await browser.get(answer)  # replayed
    assert status == 400 and "not started here" in page
    assert codes_redeemed(stack) == 1


@pytest.mark.row("connect_issuer_mismatch")
async def test_an_answer_naming_another_issuer_is_refused_before_the_code_is_used(
    stack: UserOAuthStack, browsers: tuple[HttpBrowser, HttpBrowser], tmp_path: Path
) -> None:
    browser = browsers[0]
    answer = await authorize(
        browser, await start_authorization(browser, stack, "alice"), UPSTREAM_USERS[0]
    )
    assert parse_qs(urlsplit(answer).query)["iss"] == [stack.upstream.url]
    mixed_up = with_params(answer, iss="https://attacker.example")
    status, _, page = await browser.get(mixed_up)
    assert status == 400 and "another authorization server" in page
    assert codes_redeemed(stack) == 0 and await stack.record("alice") is None
    # Missing while the server advertises it (authorization_response_iss_parameter_supported).
    answer = await authorize(
        browser, await start_authorization(browser, stack, "alice"), UPSTREAM_USERS[0]
    )
    status, _, _ = await browser.get(with_params(answer, iss=None))
    assert status == 400 and codes_redeemed(stack) == 0
    # An error answer from the wrong issuer is not acted on either: the same refusal.
    request = await start_authorization(browser, stack, "alice")
    error = with_params(
        stack.login.url("/oauth/callback?x=1"),
        x=None,
        state=_state(request),
        error="access_denied",
        iss="https://attacker.example",
    )
    status, _, _ = await browser.get(error)
    assert status == 400
    reasons = [e.get("reason") for e in events(tmp_path) if e["event"] == "upstream_consent_failed"]
    assert reasons.count("issuer_mismatch") == 3


def _state(url: str) -> str:
    return parse_qs(urlsplit(url).query)["state"][0]


@pytest.mark.row("connect_failed")
async def test_a_code_of_another_client_and_a_declined_consent_are_refused(
    stack: UserOAuthStack, browsers: tuple[HttpBrowser, HttpBrowser], tmp_path: Path
) -> None:
    browser = browsers[0]
    request = await start_authorization(browser, stack, "alice")
    # The attacker's own client at the same server, redirecting to the gateway too.
    callback = stack.login.url("/oauth/callback")
    stack.upstream.register_client(
        "attacker",
        "attacker-secret",
        grant_types=["authorization_code"],
        redirect_uris=[callback],
    )
    verifier = "v" * 50
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    theirs = f"{stack.upstream.url}/authorize?" + urlencode(
        {
            "response_type": "code",
            "client_id": "attacker",
            "redirect_uri": callback,
            "state": "theirs",
            "code_challenge": challenge.decode().rstrip("="),
            "code_challenge_method": "S256",
            "scope": "notes:read",
        }
    )
    async with aiohttp.ClientSession() as session:
        attacker = HttpBrowser(session, "http://attacker.invalid")
        injected = await authorize(attacker, theirs, UPSTREAM_USERS[1])
    code = parse_qs(urlsplit(injected).query)["code"][0]
    answer = with_params(
        callback + "?x=1", x=None, code=code, state=_state(request), iss=stack.upstream.url
    )
    status, _, page = await browser.get(answer)
    assert status == 403 and "not granted" in page
    assert await stack.record("alice") is None
    # The person says no at the server.
    request = await start_authorization(browser, stack, "alice")
    _, _, form_page = await browser.get(request)
    fields = {**hidden_fields(form_page), "signin_user": UPSTREAM_USERS[0], "approve": "no"}
    status, headers, _ = await browser.post(request.partition("?")[0], fields, origin=None)
    status, _, page = await browser.get(headers["Location"])
    assert status == 403 and await stack.record("alice") is None
    reasons = [e.get("reason") for e in events(tmp_path) if e["event"] == "upstream_consent_failed"]
    assert "invalid_grant" in reasons and "access_denied" in reasons


async def test_an_answer_opened_in_another_persons_browser_stores_nothing(
    stack: UserOAuthStack, browsers: tuple[HttpBrowser, HttpBrowser], tmp_path: Path
) -> None:
    alice, bob = browsers
    answer = await authorize(
        alice, await start_authorization(alice, stack, "alice"), UPSTREAM_USERS[0]
    )
    await sign_in(bob, stack.login, "bob")
    status, _, _ = await bob.get(answer)  # Bob is tricked into opening Alice's answer
    assert status == 400
    assert await stack.record("bob") is None and await stack.record("alice") is None
    failed = [e for e in events(tmp_path) if e["event"] == "upstream_consent_failed"]
    assert failed[-1]["reason"] == "identity_mismatch" and failed[-1]["subject"] == "bob"
    status, _, _ = await alice.get(answer)  # still Alice's, in her browser
    assert status == 200 and await stack.record("alice") is not None


async def test_each_persons_call_carries_their_own_upstream_token(stack: UserOAuthStack) -> None:
    await connected(stack, "alice", UPSTREAM_USERS[0])
    await connected(stack, "bob", UPSTREAM_USERS[1])
    for sub, upstream in (("alice", 0), ("bob", 1), ("alice", 0), ("bob", 1)):
        _, _, text = await stack.stack.call(stack.token(sub), WHOAMI)
        assert json.loads(text)["result"]["structuredContent"]["sub"] == UPSTREAM_USERS[upstream]
    tokens = {call.subject: call.token for call in stack.accounts.calls}
    assert len(set(tokens.values())) == 2
    # Carol has connected nothing: she is asked to, never served another person's token.
    _, _, text = await stack.stack.call(stack.token("carol"), WHOAMI)
    assert json.loads(text)["result"]["isError"] is True


@pytest.mark.row("connect_unavailable")
async def test_a_server_that_cannot_be_reached_fails_the_page_closed(
    make_stack: MakeStack,
) -> None:
    unreachable = {"authorization_server": "http://127.0.0.1:9"}
    async with (
        make_stack.of(user_oauth_stack, credential=unreachable) as stack,
        aiohttp.ClientSession() as session,
    ):
        browser = HttpBrowser(session, stack.login.origin)
        link = await consent_link(stack, "alice")
        await sign_in(browser, stack.login, "alice", next_path=urlsplit(link).path)
        status, headers, page = await browser.get(link)
        assert status == 503 and int(headers["Retry-After"]) >= 1
        assert "try again" in page
