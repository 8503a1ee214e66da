"""Two replicas of one gateway on a real redis-server share the login surface: a session signed
in at one is a session at the other (same keys, same resource), a sign-out at one ends it at
both, a sign-in answer is accepted once whichever replica gets it, and a pending action started
at one is redeemed once, at either, by its owner only."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from gateway.seams import Principal
from tests.integration.login.test_login_refusals import assert_row
from tests.support.live_stack import ServerFactory
from tests.support.login_stack import (
    CHECK,
    HttpBrowser,
    authorize,
    csrf_of,
    login_stack,
    replica_places,
    sign_in,
)
from tests.support.redis_server import RedisServer


def principal(issuer: str, subject: str) -> Principal:
    return Principal(subject, "mcp-client", frozenset(), 2e9, issuer, "fp")


async def test_sessions_sign_outs_answers_and_pending_actions_are_shared(
    places: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    async with (
        login_stack(**places[0]) as a,
        login_stack(**places[1]) as b,
        aiohttp.ClientSession() as session,
    ):
        browser = HttpBrowser(session, a.origin, aliases=(b.origin,))
        # A session signed in at A is a session at B.
        assert await sign_in(browser, a, "alice") == "/gateway/account"
        status, _, page = await browser.get(b.url("/account"))
        assert status == 200 and "Signed in as <code>alice</code>" in page

        # A pending action started at B is redeemed once, at A, by its owner only.
        link = await b.surface.actions.start(CHECK, principal(a.issuer.url, "alice"), b"rec", 60)
        path = urlsplit(link).path
        intruder = HttpBrowser(session, a.origin, aliases=(b.origin,))
        await sign_in(intruder, a, "bob")
        assert_row(await intruder.get(b.origin + path), "login_identity_mismatch", 403)
        status, _, page = await browser.get(a.origin + path)
        assert status == 200 and '<p id="record">rec</p>' in page
        status, _, done = await browser.post(a.origin + path, {"csrf": csrf_of(page)})
        assert status == 200 and '<p id="redeemed">rec</p>' in done
        assert_row(await browser.get(b.origin + path), "login_not_found", 404)

        # A sign-out at B ends the session at A too (the cookie copy is refused).
        kept = dict(browser.cookies)
        _, _, account = await browser.get(b.url("/account"))
        await browser.post(b.url("/logout"), {"csrf": csrf_of(account)})
        browser.cookies.update(kept)
        status, headers, _ = await browser.get(a.url("/account"))
        assert status == 303 and headers["Location"].startswith("/gateway/login")

        # A sign-in answer used at A is refused at B.
        fresh = HttpBrowser(session, a.origin, aliases=(b.origin,))
        _, headers, _ = await fresh.get(a.url("/login"))
        callback = await authorize(fresh, headers["Location"], "carol")
        signin_cookie = dict(fresh.cookies)
        assert (await fresh.get(callback))[0] == 303
        replay = HttpBrowser(session, b.origin, cookies=signin_cookie)
        replayed = callback.replace(a.origin, b.origin)
        assert_row(await replay.get(replayed), "login_state_invalid", 400)


async def test_redis_down_fails_the_pages_closed(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    redis = RedisServer.launch(tmp_path / "redis")
    try:
        async with (
            replica_places(tmp_path, aiohttp_server, monkeypatch, redis) as (first, _),
            login_stack(**first) as a,
            aiohttp.ClientSession() as session,
        ):
            browser = HttpBrowser(session, a.origin)
            await sign_in(browser, a, "alice")
            redis.stop()
            answer = await browser.get(a.url("/account"))
            assert_row(answer, "login_unavailable", 503)
            assert int(answer[1]["Retry-After"]) >= 1
    finally:
        redis.destroy()
