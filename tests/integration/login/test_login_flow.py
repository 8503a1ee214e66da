"""The login surface through HTTP: sign in at the development issuer (relying party, code +
PKCE), the account page, sign out; the cookies' attributes and the pages' security headers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.dev.dev_issuer import DevIssuer
from gateway.login.cookies import SESSION_COOKIE, SIGNIN_COOKIE
from gateway.login.pages import SECURITY_HEADERS
from tests.support.live_stack import MakeStack
from tests.support.login_stack import (
    LOGIN_CLIENT,
    LOGIN_SECRET,
    HttpBrowser,
    LoginStack,
    authorize,
    csrf_of,
    login_stack,
    sign_in,
)


@pytest.fixture
async def stack(make_stack: MakeStack) -> AsyncIterator[LoginStack]:
    async with make_stack.of(login_stack) as running:
        yield running


@pytest.fixture
async def browser(stack: LoginStack) -> AsyncIterator[HttpBrowser]:
    async with aiohttp.ClientSession() as session:
        yield HttpBrowser(session, stack.origin)


def assert_security_headers(headers: Any) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert headers[name] == value, name
    csp = headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "script-src" not in csp
    assert "'unsafe-inline'" not in csp


async def test_sign_in_shows_the_account_page_and_sign_out_ends_the_session(
    stack: LoginStack, browser: HttpBrowser
) -> None:
    status, headers, _ = await browser.get(stack.url("/account"))
    assert status == 303
    assert headers["Location"] == "/gateway/login?next=/gateway/account"
    assert_security_headers(headers)

    assert await sign_in(browser, stack, "bob") == "/gateway/account"
    assert SESSION_COOKIE in browser.cookies and SIGNIN_COOKIE not in browser.cookies
    status, headers, page = await browser.get(stack.url("/account"))
    assert status == 200
    assert_security_headers(headers)
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "Signed in as <code>bob</code>" in page
    assert stack.issuer.url in page

    status, headers, page = await browser.post(stack.url("/logout"), {"csrf": csrf_of(page)})
    assert status == 200 and "signed out" in page
    assert_security_headers(headers)
    assert SESSION_COOKIE not in browser.cookies
    status, headers, _ = await browser.get(stack.url("/account"))
    assert status == 303 and headers["Location"].startswith("/gateway/login")


async def test_the_cookies_are_host_prefixed_httponly_secure_and_lax(
    stack: LoginStack, browser: HttpBrowser
) -> None:
    await sign_in(browser, stack, "alice")
    made = [h for h in browser.set_cookie_headers if "Max-Age=0" not in h and '=""' not in h]
    assert {h.split("=", 1)[0] for h in made} == {SIGNIN_COOKIE, SESSION_COOKIE}
    for header in made:
        attributes = {part.strip().split("=")[0].lower() for part in header.split(";")[1:]}
        assert {"httponly", "secure", "path", "max-age", "samesite"} <= attributes, header
        assert "domain" not in attributes and "Path=/;" in header + ";"
        assert "SameSite=Lax" in header


async def test_a_signed_out_session_stays_ended_even_if_its_cookie_comes_back(
    stack: LoginStack, browser: HttpBrowser
) -> None:
    await sign_in(browser, stack, "alice")
    kept = dict(browser.cookies)
    _, _, page = await browser.get(stack.url("/account"))
    await browser.post(stack.url("/logout"), {"csrf": csrf_of(page)})
    browser.cookies.update(kept)  # a copy of the cookie taken before sign-out
    status, headers, _ = await browser.get(stack.url("/account"))
    assert status == 303 and headers["Location"].startswith("/gateway/login")


async def test_login_issuer_names_a_second_issuer_with_people_of_its_own(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second development issuer instance: another authorization server, its own people.
    second = DevIssuer(users=("pat", "quinn"))
    await second.start()
    try:
        second.register_client("mcp-gateway", "second-secret", can_introspect=True)
        monkeypatch.setenv("SECOND_SECRET", "second-secret")
        entries = [
            {
                "url": "{issuer_url}",
                "client_id": "mcp-gateway",
                "client_secret": {"env": "LIVE_STACK_GW_SECRET"},
                "allow_insecure_http": True,
            },
            {
                "url": second.url,
                "client_id": "mcp-gateway",
                "client_secret": {"env": "SECOND_SECRET"},
                "allow_insecure_http": True,
            },
        ]
        keys = {"issuer": None, "issuers": entries}
        second.register_client(
            LOGIN_CLIENT,
            LOGIN_SECRET,
            grant_types=["authorization_code"],
            redirect_uris=[],
        )
        async with (
            make_stack.of(login_stack, gateway=keys, issuer=second.url) as stack,
            aiohttp.ClientSession() as session,
        ):
            second.store.clients[LOGIN_CLIENT].redirect_uris = (stack.url("/callback"),)
            browser = HttpBrowser(session, stack.origin)
            _, headers, _ = await browser.get(stack.url("/login"))
            assert headers["Location"].startswith(second.url + "/authorize?")
            await browser.get(await authorize(browser, headers["Location"], "quinn"))
            _, _, page = await browser.get(stack.url("/account"))
            assert "Signed in as <code>quinn</code>" in page and second.url in page
    finally:
        await second.stop()


async def test_the_sign_in_client_may_authenticate_with_private_key_jwt(
    tmp_path: Path, make_stack: MakeStack
) -> None:
    from joserfc.jwk import RSAKey

    from tests.support.test_issuer import generate_rsa_key

    private, public = generate_rsa_key()
    (tmp_path / "login-key.pem").write_text(private)
    login = {
        "client_auth": "private_key_jwt",
        "private_key": {"file": str(tmp_path / "login-key.pem")},
        "private_key_id": "login-1",
    }
    async with (
        make_stack.of(login_stack, **login) as stack,
        aiohttp.ClientSession() as session,
    ):
        client = stack.issuer.store.clients[LOGIN_CLIENT]
        client.auth_method, client.secret = "private_key_jwt", None
        client.jwks = {
            "keys": [RSAKey.import_key(public).as_dict(private=False) | {"kid": "login-1"}]
        }
        stack.issuer.store.assertion_audience = "issuer"  # rfc7523bis: the issuer identifier
        browser = HttpBrowser(session, stack.origin)
        assert await sign_in(browser, stack, "carol") == "/gateway/account"
        assert "Signed in as <code>carol</code>" in (await browser.get(stack.url("/account")))[2]
