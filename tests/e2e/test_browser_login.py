"""The login surface in a real browser: Debian's Chromium, driven by playwright
(:mod:`tests.support.chromium`), against the production gateway and the development issuer.

A person signs in at the development issuer, choosing who they are among several users, sees
the account page, and signs out; a tampered session cookie is no session; a form posted from
another origin (with the person's cookie: same site) does nothing; a pending action's link
opened while another person is signed in does nothing (audited), and once its owner signs in
the test page of the pending-action API shows and redeems it, once.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway.login.cookies import SESSION_COOKIE
from gateway.seams import Principal
from tests.support.chromium import needs_chromium
from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.login_stack import CHECK, LoginStack, login_stack

pytestmark = needs_chromium


@pytest.fixture
async def stack(tmp_path: Path, make_stack: MakeStack) -> AsyncIterator[LoginStack]:
    audit = {"audit": {"sink": "file", "path": str(tmp_path / "audit.jsonl")}}
    async with make_stack.of(login_stack, gateway=audit) as running:
        yield running


async def sign_in_at_the_issuer(page: Any, user: str) -> None:
    """On the development issuer's sign-in page: choose ``user``, sign in."""
    await page.wait_for_selector("text=choose who you are")
    await page.check(f"input[name=signin_user][value={user}]")
    await page.click("button[value=yes]")


async def test_sign_in_choosing_a_user_see_the_account_page_and_sign_out(
    stack: LoginStack, browser: Any
) -> None:
    page = await browser.new_page()
    answer = await page.goto(stack.url("/account"))
    assert answer is not None
    await sign_in_at_the_issuer(page, "bob")
    await page.wait_for_url(stack.url("/account"))
    assert "Signed in as bob" in await page.inner_text("p.who")
    (cookie,) = [c for c in await browser.cookies() if c["name"] == SESSION_COOKIE]
    assert (cookie["httpOnly"], cookie["secure"], cookie["sameSite"]) == (True, True, "Lax")
    assert cookie["path"] == "/" and cookie["domain"] == "127.0.0.1"
    assert await page.evaluate("document.cookie") == ""  # HttpOnly: no script sees it

    await page.click("button:text('Sign out')")
    await page.wait_for_selector("text=You are signed out.")
    assert not [c for c in await browser.cookies() if c["name"] == SESSION_COOKIE]
    await page.goto(stack.url("/account"))
    await page.wait_for_selector("text=choose who you are")  # sent to sign in again


async def test_a_tampered_session_cookie_is_no_session(stack: LoginStack, browser: Any) -> None:
    page = await browser.new_page()
    await page.goto(stack.url("/account"))
    await sign_in_at_the_issuer(page, "alice")
    await page.wait_for_url(stack.url("/account"))
    (cookie,) = [c for c in await browser.cookies() if c["name"] == SESSION_COOKIE]
    value = cookie["value"]
    cookie["value"] = value[:20] + ("A" if value[20] != "A" else "B") + value[21:]
    await browser.add_cookies([cookie])
    await page.goto(stack.url("/account"))
    await page.wait_for_selector("text=choose who you are")


async def test_a_form_posted_from_another_origin_does_nothing(
    stack: LoginStack, browser: Any, aiohttp_server: ServerFactory
) -> None:
    async def attack(request: web.Request) -> web.Response:
        form = (
            f'<form method="post" action="{stack.url("/logout")}">'
            '<input type="hidden" name="csrf" value="guessed"><button id="go">go</button></form>'
        )
        return web.Response(text=form, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", attack)
    evil = await aiohttp_server(app, host="127.0.0.1")  # another port: another origin, same site
    page = await browser.new_page()
    await page.goto(stack.url("/account"))
    await sign_in_at_the_issuer(page, "alice")
    await page.wait_for_url(stack.url("/account"))
    await page.goto(str(evil.make_url("/")))
    await page.click("#go")
    await page.wait_for_selector("text=The form could not be accepted")
    await page.goto(stack.url("/account"))
    assert "Signed in as alice" in await page.inner_text("p.who")  # not signed out


async def test_a_link_opened_by_another_signed_in_user_does_nothing_until_its_owner_signs_in(
    stack: LoginStack, browser: Any, tmp_path: Path
) -> None:
    owner = Principal("carol", "mcp-client", frozenset(), 2e9, stack.issuer.url, "fp")
    link = await stack.surface.actions.start(CHECK, owner, b"carol-record", 120)
    page = await browser.new_page()
    await page.goto(link)
    await sign_in_at_the_issuer(page, "bob")  # the wrong person signs in
    await page.wait_for_selector("text=This link was started by another user")
    assert "carol-record" not in await page.content()
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    (mismatch,) = [e for e in events if e["event"] == "login_identity_mismatch"]
    assert (mismatch["subject"], mismatch["kind"]) == ("bob", CHECK)

    await page.click("button:text('Sign out')")
    await page.wait_for_selector("text=You are signed out.")
    await page.goto(link)
    await sign_in_at_the_issuer(page, "carol")
    await page.wait_for_url(link)
    assert await page.inner_text("#record") == "carol-record"
    await page.click("#redeem")
    await page.wait_for_selector("#redeemed")
    assert await page.inner_text("#redeemed") == "carol-record"
    await page.goto(link)
    await page.wait_for_selector("text=This page or link does not exist")


async def test_the_demo_shows_the_account_page_after_signing_in_as_a_demo_user(
    browser: Any,
) -> None:
    from gateway.demo.stack import start_demo, wait_ready

    demo = await start_demo(port=0)
    try:
        assert await wait_ready(demo, timeout_s=15)
        assert demo.account_url == demo.mcp_url.removesuffix("/mcp") + "/gateway/account"
        assert demo.state()["account_url"] == demo.account_url
        page = await browser.new_page()
        await page.goto(demo.account_url)
        await sign_in_at_the_issuer(page, "demo-writer")
        await page.wait_for_url(demo.account_url)
        assert "Signed in as demo-writer" in await page.inner_text("p.who")
    finally:
        await demo.stop()
