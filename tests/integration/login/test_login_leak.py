"""SECURITY: nothing secret of a sign-in or a pending action shows anywhere an operator or a
person can see: no authorization code, ``state``, ``nonce``, PKCE verifier, ID token, access
token the issuer handed over, client secret, cookie value or pending-action nonce in a log line
(structlog, stdlib, stdout/stderr: the audit trail goes there), a metric, an exported span, or a
page's body or headers (a ``Set-Cookie`` carries its own cookie, a redirect's ``Location`` the
protocol's parameters to the issuer: those two are where they belong and are not searched).

Every outcome of the surface is driven over HTTP while everything is captured: a sign-in, its
replay, a mix-up, another browser's answer, another client's code, an ID token for another
audience, a CSRF failure, a pending action started, refused to another person, redeemed, and a
sign-out.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
import structlog

from gateway.login.cookies import SIGNIN_COOKIE
from gateway.seams import Principal
from tests.integration.login.test_login_refusals import with_query
from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.login_stack import (
    CHECK,
    LOGIN_SECRET,
    HttpBrowser,
    LoginStack,
    authorize,
    csrf_of,
    login_stack,
    sign_in,
)
from tests.support.otlp_receiver import OtlpReceiver


class Recorder:
    """What must never show: every secret value the flows make."""

    def __init__(self) -> None:
        self.secrets: set[str] = {LOGIN_SECRET}
        self.page_only: set[str] = set()
        """On the pages that need them (a form's CSRF token), and nowhere else."""
        self.links: set[str] = set()
        """A pending action's nonce: its link's path, so in the access line's ``path`` (as in
        the TLS proxy's log); nowhere else (the audit trail and the login lines: a digest)."""
        self.seen: list[str] = []

    def protocol(self, url: str) -> None:
        query = parse_qs(urlsplit(url).query)
        for name in ("code", "state", "nonce"):
            self.secrets.update(query.get(name, ()))

    def answer(self, answer: tuple[int, Any, str]) -> None:
        status, headers, body = answer
        shown = {k: v for k, v in headers.items() if k not in ("Set-Cookie", "Location")}
        self.seen.append(f"{status} {shown!r} {body}")


async def test_no_outcome_of_the_login_surface_leaks_a_secret(
    aiohttp_server: ServerFactory,
    make_stack: MakeStack,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    receiver = OtlpReceiver()
    collector = await aiohttp_server(receiver.app(), host="127.0.0.1")
    record = Recorder()
    tracing = {"otlp": {"endpoint": f"http://127.0.0.1:{collector.port}", "timeout_s": 2}}
    keys = {"audit": {"sink": "stdout"}, "tracing": tracing}
    with structlog.testing.capture_logs() as events:
        async with (
            make_stack.of(login_stack, gateway=keys) as stack,
            aiohttp.ClientSession() as session,
        ):
            issuer = stack.issuer
            signer = issuer.server.sign_id_token

            def recording_signer(claims: dict[str, Any]) -> str:
                token = signer(claims)
                record.secrets.add(token)
                record.secrets.add(token.rsplit(".", 1)[1])
                return token

            issuer.server.sign_id_token = recording_signer
            await drive(stack, session, record)
            for token in issuer.store.tokens.values():
                if token.client_id == "gateway-login":
                    record.secrets.add(token.value)  # the access token the gateway dropped
            async with session.get(stack.stack.server.ops_url + "/metrics") as metrics:
                record.seen.append(await metrics.text())
            # An MCP request is traced too, so the exporter runs and the receiver has bytes.
            status, _, _ = await stack.stack.call(stack.stack.token(), "echo", {"text": "x"})
            assert status == 200
            await receiver.wait_for(1)
    out, err = capfd.readouterr()
    places = {
        "structlog": repr(events),
        "stdout": out,
        "stderr": err,
        # authlib's records are the development issuer's (it plays the issuer in this process:
        # its debug lines quote its own clients); every other logger is the gateway's.
        "stdlib": "\n".join(
            record.getMessage()
            for record in caplog.records
            if not record.name.startswith("authlib")
        ),
        "answers and metrics": "\n".join(record.seen),
        "spans": b"".join(receiver.raw).decode("latin-1"),
    }
    assert '"event":"login_signed_in"' in out  # the audit trail was written, and searched
    assert len(record.secrets) > 10
    access = [e for e in events if e.get("event") == "http.request"]
    assert any(nonce in e["path"] for e in access for nonce in record.links)
    no_access = {
        "structlog": repr([e for e in events if e.get("event") != "http.request"]),
        "audit": "\n".join(line for line in out.splitlines() if '"log":"audit"' in line),
        "spans": places["spans"],
        "metrics": record.seen[-1],
    }
    for nonce in record.links:
        assert len(nonce) == 43
        for where, text in no_access.items():
            assert nonce not in text, f"a pending action's link leaked into {where}"
    for secret in record.secrets | record.page_only:
        assert len(secret) >= 24, "a short value would match by chance"
        for where, text in places.items():
            if secret in record.page_only and where == "answers and metrics":
                continue
            for part in (secret, secret[:24], secret[-24:]):  # a cut copy leaks too
                assert part not in text, f"a secret leaked into {where}: {_where(text, part)}"


async def drive(stack: LoginStack, session: aiohttp.ClientSession, record: Recorder) -> None:
    browser = HttpBrowser(session, stack.origin)

    async def get(who: HttpBrowser, url: str) -> tuple[int, Any, str]:
        answer = await who.get(url)
        record.answer(answer)
        return answer

    async def started(who: HttpBrowser) -> str:
        _, headers, _ = await who.get(stack.url("/login"))
        record.protocol(headers["Location"])
        value = who.cookies[SIGNIN_COOKIE]
        record.secrets.add(value)
        cookies = stack.surface.cookies
        opened = cookies._open(cookies._signin, value)
        assert opened is not None
        record.secrets.add(opened["pkce"])
        callback = await authorize(who, headers["Location"], "alice")
        record.protocol(callback)
        return callback

    # A sign-in, then its replay (single use).
    callback = await started(browser)
    kept = dict(browser.cookies)
    await get(browser, callback)
    record.secrets.update(browser.cookies.values())
    replay = HttpBrowser(session, stack.origin, cookies=kept)
    await get(replay, callback)
    # A mix-up, another browser's answer, another client's code, a wrong-audience ID token.
    other = HttpBrowser(session, stack.origin)
    await get(other, with_query(await started(other), iss="https://attacker.example"))
    third = HttpBrowser(session, stack.origin)
    await started(third)
    await get(third, await started(HttpBrowser(session, stack.origin)))
    stack.issuer.register_client(
        "other-app",
        "other-app-secret-value",
        grant_types=["authorization_code"],
        redirect_uris=[stack.url("/callback")],
    )
    fourth = HttpBrowser(session, stack.origin)
    _, headers, _ = await fourth.get(stack.url("/login"))
    record.protocol(headers["Location"])
    foreign = await authorize(fourth, with_query(headers["Location"], client_id="other-app"), "bob")
    record.protocol(foreign)
    await get(fourth, foreign)
    stack.issuer.id_token_claims["aud"] = "someone-else"
    await get(other, await started(other))
    stack.issuer.id_token_claims.clear()
    # Pending actions: started, refused to another person, redeemed by its owner.
    owner = Principal("alice", "mcp-client", frozenset(), 2e9, stack.issuer.url, "fp")
    link = await stack.surface.actions.start(CHECK, owner, b"record-body", 60)
    record.links.add(link.rsplit("/", 1)[1])
    bob = HttpBrowser(session, stack.origin)
    await sign_in(bob, stack, "bob")
    record.secrets.update(bob.cookies.values())
    await get(bob, link)
    _, _, page = await get(browser, link)
    answer = await browser.post(link, {"csrf": csrf_of(page)})
    record.answer(answer)
    record.page_only.add(csrf_of(page))
    # A CSRF failure, then a sign-out.
    record.answer(await browser.post(stack.url("/logout"), {"csrf": "x" * 43}, origin=None))
    _, _, account = await get(browser, stack.url("/account"))
    record.answer(await browser.post(stack.url("/logout"), {"csrf": csrf_of(account)}))


def _where(text: str, secret: str) -> str:
    at = text.index(secret)
    return text[max(0, at - 300) : at + 80]
