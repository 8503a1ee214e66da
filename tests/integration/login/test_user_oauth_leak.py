"""SECURITY: a person's upstream token (issue 45: "the user's upstream token in any answer, log,
span or metric") never shows anywhere an operator, a client or a person can see: no access
token or refresh token the service's server issued, no authorization code, ``state`` or PKCE
verifier of the upstream authorization, no client secret, in a log line (structlog, stdlib,
stdout/stderr, where the audit trail goes), a metric, an exported span, an MCP answer, a page, or
the operators' listing.

Every path is driven while everything is captured: consent by URL elicitation (2026-07-28), by
``-32042`` (2025-11-25), from the account page; calls; a refresh at expiry; an upstream 401 that
refreshes; a second 401 that asks again; ``insufficient_scope``; a mix-up and a replayed answer;
a disconnect; the operators' list and purge.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
import structlog

from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.login_stack import HttpBrowser, authorize, hidden_fields, sign_in
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.user_oauth_stack import (
    CATALOG_TOKEN,
    CLIENT_ID,
    CLIENT_SECRET,
    CONSENT_KEY,
    UPSTREAM_USERS,
    URL_ELICITATION,
    WHOAMI,
    UserOAuthStack,
    user_oauth_stack,
)

ADMIN = "d" * 40


class Seen:
    def __init__(self) -> None:
        self.texts: list[str] = []
        self.protocol: set[str] = set()
        """Codes and states of the upstream authorization (searched everywhere but the
        redirects that carry them: the browser's own location)."""

    def answer(self, answer: tuple[int, Any, str]) -> tuple[int, Any, str]:
        status, headers, body = answer
        shown = {k: v for k, v in dict(headers).items() if k not in ("Set-Cookie", "Location")}
        self.texts.append(f"{status} {shown!r} {body}")
        return answer

    def location(self, url: str) -> None:
        query = parse_qs(urlsplit(url).query)
        for name in ("code", "state"):
            self.protocol.update(query.get(name, ()))


async def consent(
    stack: UserOAuthStack,
    seen: Seen,
    browser: HttpBrowser,
    link: str,
    *,
    person: str,
    upstream: str,
    signed_in: bool = False,
) -> None:
    path = urlsplit(link).path
    if not signed_in:
        await sign_in(browser, stack.login, person, next_path=path)
    _, _, page = seen.answer(await browser.get(link))
    status, headers, _ = await browser.post(link, {"csrf": hidden_fields(page)["csrf"]})
    assert status == 303
    seen.location(headers["Location"])
    callback = await authorize(browser, headers["Location"], upstream)
    seen.location(callback)
    seen.answer(await browser.get(callback))


async def drive(stack: UserOAuthStack, seen: Seen, session: aiohttp.ClientSession) -> None:
    alice, bob, carol = (HttpBrowser(session, stack.login.origin) for _ in range(3))
    mcp = stack.stack

    async def call(sub: str, **kw: Any) -> dict[str, Any]:
        answer = seen.answer(await mcp.call(stack.token(sub), WHOAMI, **kw))
        return json.loads(answer[2])  # type: ignore[no-any-return]

    # 2026-07-28: a URL elicitation.
    first = (await call("alice", capabilities=URL_ELICITATION))["result"]
    await consent(
        stack,
        seen,
        alice,
        first["inputRequests"][CONSENT_KEY]["params"]["url"],
        person="alice",
        upstream=UPSTREAM_USERS[0],
    )
    retried = await mcp.modern(
        stack.token("alice"),
        "tools/call",
        {
            "name": WHOAMI,
            "arguments": {},
            "requestState": first["requestState"],
            "inputResponses": {CONSENT_KEY: {"action": "accept"}},
        },
        capabilities=URL_ELICITATION,
    )
    seen.answer(retried)
    # 2025-11-25: -32042.
    legacy = seen.answer(
        await mcp.legacy(
            stack.token("bob"),
            "tools/call",
            {"name": WHOAMI, "arguments": {}},
            version="2025-11-25",
        )
    )
    url = json.loads(legacy[2])["error"]["data"]["elicitations"][0]["url"]
    await consent(stack, seen, bob, url, person="bob", upstream=UPSTREAM_USERS[1])
    # The account page's Connect.
    await sign_in(carol, stack.login, "carol")
    _, _, page = seen.answer(await carol.get(stack.login.url("/account")))
    form = {"csrf": hidden_fields(page)["csrf"], "backend": "accounts"}
    _, headers, _ = await carol.post(stack.login.url("/connections/connect"), form)
    await consent(
        stack,
        seen,
        carol,
        headers["Location"],
        person="carol",
        upstream=UPSTREAM_USERS[0],
        signed_in=True,
    )
    for sub in ("alice", "bob", "carol"):
        await call(sub)
    # A refresh at expiry, an upstream 401 that refreshes, a second 401 that asks again.
    store, owner = stack.user.store, stack.owner("alice")
    stored = await store.get(owner, "accounts")
    assert stored is not None
    await store.put(
        owner, replace(stored.record, expires_at=time.time() - 1), expect=stored.generation
    )
    await call("alice")
    stack.accounts.refuse = 1
    await call("bob")
    stack.accounts.refuse = 2
    await call("bob", capabilities=URL_ELICITATION)
    seen.answer(await mcp.call(stack.token("carol"), "accounts__notes_write", {"text": "x"}))
    # A mix-up and a replayed answer at the callback.
    link = (await call("bob", capabilities=URL_ELICITATION))["result"]["inputRequests"][
        CONSENT_KEY
    ]["params"]["url"]
    _, _, page = seen.answer(await bob.get(link))
    _, headers, _ = await bob.post(link, {"csrf": hidden_fields(page)["csrf"]})
    seen.location(headers["Location"])
    answer = await authorize(bob, headers["Location"], UPSTREAM_USERS[1])
    seen.location(answer)
    seen.answer(await bob.get(answer.replace("iss=", "iss=x")))
    seen.answer(await bob.get(answer))
    # Disconnect; the operators' list and purge.
    _, _, page = seen.answer(await carol.get(stack.login.url("/account")))
    form = {"csrf": hidden_fields(page)["csrf"], "backend": "accounts"}
    seen.answer(await carol.post(stack.login.url("/connections/disconnect"), form))
    ops = mcp.server.ops_url
    headers = {"Authorization": f"Bearer {ADMIN}"}
    for path, body in (("list", {}), ("purge", {"backend": "accounts"})):
        async with session.post(
            f"{ops}/admin/upstream-tokens/{path}", json=body, headers=headers
        ) as response:
            seen.texts.append(await response.text())
    async with session.get(ops + "/metrics") as response:
        seen.texts.append(await response.text())


async def test_no_path_of_per_user_upstream_authorization_leaks_a_token(
    aiohttp_server: ServerFactory,
    make_stack: MakeStack,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    # The upstream's authorization server runs in this process: its own debug log (authlib's
    # "Issue token ...") is the upstream's, not the gateway's, wherever an earlier test routed
    # the stdlib's records.
    caplog.set_level(logging.WARNING, logger="authlib")
    monkeypatch.setenv("UO_ADMIN", ADMIN)
    receiver = OtlpReceiver()
    collector = await aiohttp_server(receiver.app(), host="127.0.0.1")
    tracing = {"otlp": {"endpoint": f"http://127.0.0.1:{collector.port}", "timeout_s": 2}}
    more = {
        "audit": {"sink": "stdout"},
        "tracing": tracing,
        "admin": {"token": {"env": "UO_ADMIN"}},
    }
    seen = Seen()
    with structlog.testing.capture_logs() as events:
        async with (
            make_stack.of(user_oauth_stack, gateway=more) as stack,
            aiohttp.ClientSession() as session,
        ):
            await drive(stack, seen, session)
            await receiver.wait_for(1)
            issued = [
                token.value
                for token in stack.upstream.store.tokens.values()
                if token.client_id == CLIENT_ID
            ]
            codes = list(stack.upstream.store.codes)
    out, err = capfd.readouterr()
    places = {
        "structlog": repr(events),
        "stdout (audit trail)": out,
        "stderr": err,
        "stdlib": "\n".join(
            r.getMessage() for r in caplog.records if not r.name.startswith("authlib")
        ),
        "answers, pages, listing and metrics": "\n".join(seen.texts),
        "spans": b"".join(receiver.raw).decode("latin-1"),
    }
    assert '"event":"upstream_consent_completed"' in out  # the audit trail was searched
    assert '"event":"upstream_token_refreshed"' in out
    assert len(issued) >= 8, issued  # access and refresh tokens of three people, refreshed
    secrets = {*issued, *codes, *seen.protocol, CLIENT_SECRET, CATALOG_TOKEN}
    for secret in secrets:
        assert len(secret) >= 16, "a short value would match by chance"
        for where, text in places.items():
            for part in (secret, secret[:16], secret[-16:]):  # a cut copy leaks too
                assert part not in text, f"a secret leaked into {where}: {_where(text, part)}"


def _where(text: str, secret: str) -> str:
    at = text.index(secret)
    return text[max(0, at - 300) : at + 80]
