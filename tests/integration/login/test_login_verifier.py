"""The external verifier instead of the relying party (``login.verifier``): the gateway's side
of the protocol against a tiny verifier written here (tests/support/login_verifier.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest

from gateway.login.cookies import SESSION_COOKIE
from tests.integration.login.test_login_refusals import assert_row
from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.login_stack import HttpBrowser, LoginStack, login_stack
from tests.support.login_verifier import TinyVerifier


@pytest.fixture
async def verifier(aiohttp_server: ServerFactory) -> TinyVerifier:
    tiny = TinyVerifier()
    server = await aiohttp_server(tiny.app(), host="127.0.0.1")
    tiny.url = str(server.make_url("")).rstrip("/")
    return tiny


@pytest.fixture
async def stack(
    tmp_path: Path,
    make_stack: MakeStack,
    verifier: TinyVerifier,
) -> AsyncIterator[LoginStack]:
    settings = {
        "url": f"{verifier.url}/start",
        "issuer": verifier.url,
        "jwks_uri": f"{verifier.url}/jwks",
        "allow_insecure_http": True,
        "algorithms": ["ES256"],
    }
    audit = {"audit": {"sink": "file", "path": str(tmp_path / "audit.jsonl")}}
    async with make_stack.of(login_stack, gateway=audit, verifier=settings) as running:
        verifier.person = (running.issuer.url, "dana")
        yield running


async def sign_in(browser: HttpBrowser, stack: LoginStack) -> tuple[int, Any, str]:
    status, headers, _ = await browser.get(stack.url("/login"))
    assert status == 303
    async with browser.session.get(headers["Location"], allow_redirects=False) as answer:
        assert answer.status == 302
        callback = answer.headers["Location"]
    return await browser.get(callback)


async def test_the_verifier_is_sent_the_protocols_parameters_and_its_assertion_signs_in(
    stack: LoginStack, verifier: TinyVerifier, tmp_path: Path
) -> None:
    async with aiohttp.ClientSession() as session:
        browser = HttpBrowser(session, stack.origin)
        status, headers, _ = await sign_in(browser, stack)
        assert (status, headers["Location"]) == (303, "/gateway/account")
        (sent,) = verifier.requests
        assert set(sent) == {"response_type", "redirect_uri", "state", "nonce", "audience"}
        assert sent["response_type"] == "login_assertion"
        assert sent["redirect_uri"] == stack.url("/callback")
        assert sent["audience"] == f"{stack.origin}/mcp"
        _, _, page = await browser.get(stack.url("/account"))
        assert "Signed in as <code>dana</code>" in page
    events = (tmp_path / "audit.jsonl").read_text()
    assert '"event":"login_signed_in"' in events and '"method":"verifier"' in events


@pytest.mark.row("login_failed")
@pytest.mark.parametrize(
    ("claims", "header"),
    [
        ({"nonce": "another"}, {}),
        ({"aud": "https://elsewhere.example/mcp"}, {}),
        ({"iss": "https://impostor.example"}, {}),
        ({"exp": 1}, {}),
        ({"exp": None}, {}),
        ({"iat": 2_000_000_000}, {}),  # issued in the future
        ({"iat": 1_000, "exp": 5_000_000_000}, {}),  # too long a lifetime, and stale
        ({"sub_id": {"format": "iss_sub", "iss": "https://untrusted.example", "sub": "x"}}, {}),
        ({"sub_id": {"format": "email", "email": "dana@example.com"}}, {}),
        ({"sub_id": "dana"}, {}),
        ({}, {"typ": "JWT"}),  # another kind of JWT the verifier's key signs
        ({}, {"kid": "unknown"}),
    ],
)
async def test_an_assertion_that_fails_a_check_signs_nobody_in(
    stack: LoginStack, verifier: TinyVerifier, claims: dict[str, Any], header: dict[str, Any]
) -> None:
    verifier.claims, verifier.header = claims, header
    async with aiohttp.ClientSession() as session:
        browser = HttpBrowser(session, stack.origin)
        assert_row(await sign_in(browser, stack), "login_failed", 403)
        assert SESSION_COOKIE not in browser.cookies


@pytest.mark.row("login_failed")
async def test_a_verifier_error_signs_nobody_in(stack: LoginStack, verifier: TinyVerifier) -> None:
    verifier.error = "access_denied"
    async with aiohttp.ClientSession() as session:
        assert_row(await sign_in(HttpBrowser(session, stack.origin), stack), "login_failed", 403)


@pytest.mark.row("login_bad_request")
async def test_an_answer_without_an_assertion_is_refused(
    stack: LoginStack, verifier: TinyVerifier
) -> None:
    async with aiohttp.ClientSession() as session:
        browser = HttpBrowser(session, stack.origin)
        _, headers, _ = await browser.get(stack.url("/login"))
        state = parse_qs(urlsplit(headers["Location"]).query)["state"][0]
        answer = await browser.get(stack.url(f"/callback?state={state}"))
        assert_row(answer, "login_bad_request", 400)
