"""Every refusal of the login surface's pages, through HTTP: the status-table rows (status,
headers, the fixed HTML text), what is left undone, and the audit trail.

The attacks of issue 45: a tampered or expired session cookie, a form without or with a wrong
CSRF token or from another origin, an authorization response from another issuer (mix-up), a
replayed or foreign ``state``, a code issued to another client, and a pending action opened by
another signed-in person (nothing happens to it, the attempt is audited).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import aiohttp
import pytest

from gateway.login.cookies import SESSION_COOKIE, SIGNIN_COOKIE
from gateway.login.pages import SECURITY_HEADERS
from gateway.seams import Principal
from tests.support.live_stack import MakeStack
from tests.support.login_stack import (
    CHECK,
    HttpBrowser,
    LoginStack,
    authorize,
    csrf_of,
    login_stack,
    sign_in,
)

MESSAGES = {
    "login_bad_request": "The request could not be read.",
    "login_csrf_failed": "The form could not be accepted: reload the page and try again.",
    "login_state_invalid": "This sign-in was not started here or has already been used",
    "login_issuer_mismatch": "The sign-in answer came from another issuer: sign in again.",
    "login_failed": "Sign-in failed.",
    "login_identity_mismatch": "This link was started by another user.",
    "login_not_found": "This page or link does not exist (any more).",
    "login_method_not_allowed": "Method not allowed.",
    "login_unavailable": "Sign-in is unavailable right now; try again in a moment.",
}


def assert_row(answer: tuple[int, Any, str], row: str, status: int) -> None:
    got, headers, page = answer
    assert got == status, (got, page[:400])
    for name, value in SECURITY_HEADERS.items():
        assert headers[name] == value, name
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert MESSAGES[row] in page, page[:400]


def principal(issuer: str, subject: str) -> Principal:
    return Principal(subject, "mcp-client", frozenset(), 2e9, issuer, "fp")


@pytest.fixture
async def stack(tmp_path: Path, make_stack: MakeStack) -> AsyncIterator[LoginStack]:
    audit = {"audit": {"sink": "file", "path": str(tmp_path / "audit.jsonl")}}
    async with make_stack.of(login_stack, gateway=audit) as running:
        yield running


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


def audit_events(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def with_query(url: str, **changes: str | None) -> str:
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    for key, value in changes.items():
        if value is None:
            query.pop(key, None)
        else:
            query[key] = value
    return urlunsplit(parts._replace(query=urlencode(query)))


# --- the session cookie ----------------------------------------------------------------------


async def test_a_tampered_session_cookie_is_no_session_and_is_cleared(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    browser = HttpBrowser(session, stack.origin)
    await sign_in(browser, stack, "alice")
    value = browser.cookies[SESSION_COOKIE]
    flipped = value[:-2] + ("A" if value[-2] != "A" else "B") + value[-1]
    browser.cookies[SESSION_COOKIE] = flipped
    status, headers, _ = await browser.get(stack.url("/account"))
    assert status == 303 and headers["Location"] == "/gateway/login?next=/gateway/account"
    assert SESSION_COOKIE not in browser.cookies  # the answer deleted it


async def test_an_expired_session_cookie_is_no_session(make_stack: MakeStack) -> None:
    async with (
        make_stack.of(login_stack) as stack,
        aiohttp.ClientSession() as client,
    ):
        browser = HttpBrowser(client, stack.origin)
        await sign_in(browser, stack, "alice")
        cookies = stack.surface.cookies
        real = cookies._clock
        cookies._clock = lambda: real() + 3601  # the session lasts login.session_ttl_s
        status, headers, _ = await browser.get(stack.url("/account"))
        cookies._clock = real
        assert status == 303 and headers["Location"].startswith("/gateway/login")


# --- forms -----------------------------------------------------------------------------------


@pytest.mark.row("login_csrf_failed")
@pytest.mark.parametrize(
    ("csrf", "origin"),
    [
        (None, "same"),  # no token
        ("x" * 43, "same"),  # another token
        ("mine", "https://evil.example"),  # the right token from another origin
        ("mine", "null-cross-site"),  # Origin: null from a sandboxed frame elsewhere
    ],
)
async def test_a_form_without_the_sessions_token_from_its_origin_does_nothing(
    stack: LoginStack, session: aiohttp.ClientSession, csrf: str | None, origin: str
) -> None:
    browser = HttpBrowser(session, stack.origin)
    await sign_in(browser, stack, "alice")
    _, _, page = await browser.get(stack.url("/account"))
    form = {} if csrf is None else {"csrf": csrf_of(page) if csrf == "mine" else csrf}
    if origin == "null-cross-site":
        answer = await browser.request(
            "POST",
            stack.url("/logout"),
            data=form,
            headers={"Origin": "null", "Sec-Fetch-Site": "cross-site"},
        )
    else:
        answer = await browser.post(stack.url("/logout"), form, origin=origin)
    assert_row(answer, "login_csrf_failed", 403)
    assert (await browser.get(stack.url("/account")))[0] == 200  # still signed in


@pytest.mark.row("login_csrf_failed")
async def test_a_form_without_a_session_is_refused(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    browser = HttpBrowser(session, stack.origin)
    assert_row(await browser.post(stack.url("/logout"), {"csrf": "x"}), "login_csrf_failed", 403)


async def test_the_right_origin_header_is_accepted_too(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    browser = HttpBrowser(session, stack.origin)
    await sign_in(browser, stack, "alice")
    _, _, page = await browser.get(stack.url("/account"))
    answer = await browser.post(stack.url("/logout"), {"csrf": csrf_of(page)}, origin=stack.origin)
    assert answer[0] == 200 and "signed out" in answer[2]


@pytest.mark.row("login_bad_request")
@pytest.mark.parametrize(
    "path",
    [
        "/login?next=https://evil.example/",
        "/login?next=//evil.example/x",
        "/login?next=/elsewhere",
        "/login?next=/gateway/account&next=/gateway/account",
    ],
)
async def test_a_request_the_surface_will_not_guess_about(
    stack: LoginStack, session: aiohttp.ClientSession, path: str
) -> None:
    browser = HttpBrowser(session, stack.origin)
    assert_row(await browser.get(stack.url(path)), "login_bad_request", 400)


@pytest.mark.row("login_bad_request")
async def test_a_form_over_the_bound_or_not_urlencoded(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    browser = HttpBrowser(session, stack.origin)
    await sign_in(browser, stack, "alice")
    big = await browser.post(stack.url("/logout"), {"csrf": "x" * 8192})
    assert_row(big, "login_bad_request", 400)
    at_bound = await browser.post(stack.url("/logout"), {"csrf": "x" * (8192 - 5)})
    assert_row(at_bound, "login_csrf_failed", 403)  # read, then refused for its token
    json_body = await browser.request(
        "POST",
        stack.url("/logout"),
        json={"csrf": "x"},
        headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"},
    )
    assert_row(json_body, "login_bad_request", 400)


@pytest.mark.row("login_not_found")
@pytest.mark.row("login_method_not_allowed")
async def test_unknown_pages_and_methods(stack: LoginStack, session: aiohttp.ClientSession) -> None:
    browser = HttpBrowser(session, stack.origin)
    assert_row(await browser.get(stack.url("/nothing-here")), "login_not_found", 404)
    assert_row(await browser.get(stack.url("/unknown-kind/" + "a" * 43)), "login_not_found", 404)
    answer = await browser.get(stack.url("/logout"))
    assert_row(answer, "login_method_not_allowed", 405)
    assert answer[1]["Allow"] == "POST"
    answer = await browser.request("PUT", stack.url("/account"))
    assert_row(answer, "login_method_not_allowed", 405)
    assert answer[1]["Allow"] == "GET, HEAD"
    answer = await browser.request("HEAD", stack.url("/callback?state=x&code=y"))
    assert (answer[0], answer[1]["Allow"]) == (405, "GET")  # an answer is used up by a GET only
    assert (await browser.request("HEAD", stack.url("/account")))[0] == 303
    status, headers, _ = await browser.get(stack.url(""))
    assert (status, headers["Location"]) == (303, "/gateway/account")


# --- the answer of a sign-in -----------------------------------------------------------------


async def started(browser: HttpBrowser, stack: LoginStack, user: str = "alice") -> str:
    """A sign-in started and answered by the issuer: the callback URL, not yet visited."""
    _, headers, _ = await browser.get(stack.url("/login"))
    return await authorize(browser, headers["Location"], user)


@pytest.mark.row("login_issuer_mismatch")
@pytest.mark.parametrize("iss", ["https://attacker.example", None])
async def test_an_answer_from_another_issuer_is_refused_before_the_code_is_used(
    stack: LoginStack, session: aiohttp.ClientSession, iss: str | None
) -> None:
    browser = HttpBrowser(session, stack.origin)
    callback = await started(browser, stack)
    code = parse_qs(urlsplit(callback).query)["code"][0]
    answer = await browser.get(with_query(callback, iss=iss))
    assert_row(answer, "login_issuer_mismatch", 400)
    assert SESSION_COOKIE not in browser.cookies
    assert not stack.issuer.store.codes[code].used  # never redeemed (RFC 9207 §2.4)


@pytest.mark.row("login_state_invalid")
async def test_a_replayed_answer_is_refused(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    browser = HttpBrowser(session, stack.origin)
    callback = await started(browser, stack)
    kept = dict(browser.cookies)  # the sign-in cookie, as an attacker who copied it would
    assert (await browser.get(callback))[0] == 303
    browser.cookies.update(kept)
    browser.cookies.pop(SESSION_COOKIE)
    assert_row(await browser.get(callback), "login_state_invalid", 400)
    assert SIGNIN_COOKIE not in browser.cookies


@pytest.mark.row("login_state_invalid")
async def test_an_answer_to_another_browsers_sign_in_is_refused(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    victim = HttpBrowser(session, stack.origin)
    attacker = HttpBrowser(session, stack.origin)
    attackers_answer = await started(attacker, stack, "carol")  # login CSRF: carol's code
    await started(victim, stack, "alice")  # the victim's own sign-in is in progress
    assert_row(await victim.get(attackers_answer), "login_state_invalid", 400)
    assert SESSION_COOKIE not in victim.cookies
    no_signin = HttpBrowser(session, stack.origin)
    assert_row(await no_signin.get(attackers_answer), "login_state_invalid", 400)


@pytest.mark.row("login_failed")
async def test_a_code_issued_to_another_client_is_refused(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    issuer = stack.issuer
    issuer.register_client(
        "other-app",
        "other-secret",
        grant_types=["authorization_code"],
        redirect_uris=[stack.url("/callback")],
    )
    browser = HttpBrowser(session, stack.origin)
    _, headers, _ = await browser.get(stack.url("/login"))
    foreign = with_query(headers["Location"], client_id="other-app")  # same state, same PKCE
    answer = await browser.get(await authorize(browser, foreign, "alice"))
    assert_row(answer, "login_failed", 403)
    assert SESSION_COOKIE not in browser.cookies


@pytest.mark.row("login_failed")
async def test_a_person_who_cancels_at_the_issuer_is_not_signed_in(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    browser = HttpBrowser(session, stack.origin)
    _, headers, _ = await browser.get(stack.url("/login"))
    _, _, page = await browser.get(headers["Location"])
    from tests.support.login_stack import hidden_fields

    form = {**hidden_fields(page), "signin_user": "alice", "approve": "no"}
    _, headers, _ = await browser.post(f"{stack.issuer.url}/authorize", form, origin=None)
    assert "error=access_denied" in headers["Location"]
    assert_row(await browser.get(headers["Location"]), "login_failed", 403)


@pytest.mark.row("login_failed")
async def test_an_id_token_for_another_audience_is_refused(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    stack.issuer.id_token_claims["aud"] = "someone-else"
    browser = HttpBrowser(session, stack.origin)
    assert_row(await browser.get(await started(browser, stack)), "login_failed", 403)


@pytest.mark.row("login_unavailable")
async def test_an_unreachable_token_endpoint_is_503_with_retry_after(make_stack: MakeStack) -> None:
    async with (
        make_stack.of(login_stack, token_endpoint="http://127.0.0.1:9/token") as stack,
        aiohttp.ClientSession() as client,
    ):
        browser = HttpBrowser(client, stack.origin)
        answer = await browser.get(await started(browser, stack))
        assert_row(answer, "login_unavailable", 503)
        assert int(answer[1]["Retry-After"]) >= 1


# --- pending actions -------------------------------------------------------------------------


@pytest.mark.row("login_identity_mismatch")
async def test_a_link_opened_by_another_signed_in_person_does_nothing_and_is_audited(
    stack: LoginStack, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    issuer = stack.issuer.url
    url = await stack.surface.actions.start(CHECK, principal(issuer, "alice"), b"alice-record", 60)
    path = urlsplit(url).path
    bob = HttpBrowser(session, stack.origin)
    await sign_in(bob, stack, "bob")
    answer = await bob.get(url)
    assert_row(answer, "login_identity_mismatch", 403)
    assert "alice-record" not in answer[2]
    assert 'action="/gateway/logout"' in answer[2]  # a way to sign out and in as the owner
    _, _, account = await bob.get(stack.url("/account"))
    post = await bob.post(url, {"csrf": csrf_of(account)})
    assert_row(post, "login_identity_mismatch", 403)
    mismatches = [e for e in audit_events(tmp_path) if e["event"] == "login_identity_mismatch"]
    assert len(mismatches) == 2
    assert {e["subject"] for e in mismatches} == {"bob"} and mismatches[0]["kind"] == CHECK
    assert path.rsplit("/", 1)[1] not in (tmp_path / "audit.jsonl").read_text()
    # The record is untouched: its owner redeems it, once.
    alice = HttpBrowser(session, stack.origin)
    assert await sign_in(alice, stack, "alice", next_path=path) == path
    status, _, page = await alice.get(url)
    assert status == 200 and "alice-record" in page
    status, _, page = await alice.post(url, {"csrf": csrf_of(page)})
    assert status == 200 and '<p id="redeemed">alice-record</p>' in page
    assert_row(await alice.get(url), "login_not_found", 404)  # single use


@pytest.mark.row("login_not_found")
async def test_an_expired_link_is_not_found(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    actions = stack.surface.actions
    url = await actions.start(CHECK, principal(stack.issuer.url, "alice"), b"r", 60)
    browser = HttpBrowser(session, stack.origin)
    await sign_in(browser, stack, "alice")
    memory = stack.surface._store
    real = memory._clock  # type: ignore[attr-defined]
    memory._clock = lambda: real() + 61  # type: ignore[attr-defined]  # past its ttl_s
    try:
        assert_row(await browser.get(url), "login_not_found", 404)
    finally:
        memory._clock = real  # type: ignore[attr-defined]


async def test_a_link_without_a_session_sends_the_browser_to_sign_in_and_back(
    stack: LoginStack, session: aiohttp.ClientSession
) -> None:
    url = await stack.surface.actions.start(CHECK, principal(stack.issuer.url, "carol"), b"c", 60)
    path = urlsplit(url).path
    browser = HttpBrowser(session, stack.origin)
    status, headers, _ = await browser.get(url)
    assert (status, headers["Location"]) == (303, f"/gateway/login?next={path}")
    assert await sign_in(browser, stack, "carol", next_path=path) == path
    assert '<p id="record">c</p>' in (await browser.get(url))[2]
