"""SECURITY: the approval paths (docs/policy.md#approvals) show no caller's token, no session
cookie, no CSRF token and no redacted argument anywhere an operator, an approver or a webhook can
see: log lines (structlog, stdlib, stdout/stderr, where the audit trail goes), metrics, pages,
the webhook's messages. Every path is driven while everything is captured: a URL elicitation
approved and run, a replay, a form answer, a denial, -32042, a tool error, an approver set's
request and its list, a refused approver."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from aiohttp import web

from tests.support.approval_stack import APPROVAL_KEY, ApprovalStack, approval_stack, decide
from tests.support.live_stack import ServerFactory
from tests.support.login_stack import HttpBrowser, csrf_of, sign_in

SECRET = "hunter2-redacted-value-0123456789"
ARGS = {"text": "rotate keys", "secret": SECRET}


async def drive(
    stack: ApprovalStack, session: aiohttp.ClientSession, pages: list[str], cookies: list[str]
) -> list[str]:
    answers: list[str] = []

    async def call(person: str, tool: str) -> dict[str, Any]:
        _status, _, text = await stack.call(person, tool, ARGS)
        answers.append(text)
        return dict(json.loads(text))

    alice = HttpBrowser(session, stack.login.origin)
    bob = HttpBrowser(session, stack.login.origin)
    carol = HttpBrowser(session, stack.login.origin)
    for browser, person in ((alice, "alice"), (bob, "bob"), (carol, "carol")):
        await sign_in(browser, stack.login, person)
    first = (await call("alice", "wipe"))["result"]
    link = first["inputRequests"][APPROVAL_KEY]["params"]["url"]
    pages.append((await carol.get(link))[2])  # refused: another person
    pages.append((await alice.get(link))[2])
    pages.append((await decide(alice, stack, link, "alice"))[1])
    for answer in (None, None, {"action": "accept", "content": {"ok": True}}):
        answers.append((await stack.retry("alice", "wipe", ARGS, first["requestState"], answer))[2])
    denied = (await call("bob", "wipe"))["result"]
    pages.append(
        (
            await decide(
                bob, stack, denied["inputRequests"][APPROVAL_KEY]["params"]["url"], "bob", "deny"
            )
        )[1]
    )
    answers.append((await stack.retry("bob", "wipe", ARGS, denied["requestState"]))[2])
    token = stack.token("carol")
    version = {"MCP-Protocol-Version": "2025-11-25"}
    answers.append(
        (
            await stack.login.stack.legacy_call(
                token, "wipe", ARGS, capabilities={"elicitation": {"url": {}}}, headers=version
            )
        )[2]
    )
    answers.append((await stack.login.stack.legacy_call(token, "pay", ARGS))[2])
    pay = (await call("alice", "pay"))["result"]
    pages.append((await bob.get(stack.login.url("/approvals")))[2])
    pages.append(
        (await decide(bob, stack, pay["inputRequests"][APPROVAL_KEY]["params"]["url"], "bob"))[1]
    )
    answers.append((await stack.retry("alice", "pay", ARGS, pay["requestState"]))[2])
    async with session.get(stack.login.stack.server.ops_url + "/metrics") as response:
        pages.append(await response.text())
    for browser in (alice, bob, carol):  # the CSRF tokens first, then the cookies
        cookies.append(csrf_of((await browser.get(stack.login.url("/account")))[2]))
    for browser in (alice, bob, carol):
        cookies.extend(browser.cookies.values())
    return answers


async def test_no_approval_path_leaks_a_token_a_cookie_or_a_redacted_value(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.WARNING, logger="authlib")
    posted: list[str] = []

    async def hook(request: web.Request) -> web.Response:
        posted.append((await request.read()).decode())
        return web.Response(status=204)

    app = web.Application()
    app.router.add_post("/hook", hook)
    hook_url = str((await aiohttp_server(app)).make_url("/hook"))
    more = {
        "audit": {"sink": "stdout"},
        "approvals": {"wait_s": 0.2, "webhook": {"url": hook_url, "allow_insecure_http": True}},
        "logging": {"log_arguments": False},
    }
    pages: list[str] = []
    with structlog.testing.capture_logs() as events:
        async with (
            approval_stack(tmp_path, aiohttp_server, monkeypatch, gateway=more) as stack,
            aiohttp.ClientSession() as session,
        ):
            cookies: list[str] = []
            answers = await drive(stack, session, pages, cookies)
            tokens = [stack.token(person) for person in ("alice", "bob", "carol")]
    out, err = capfd.readouterr()
    assert '"event":"approval_executed"' in out and '"event":"approval_denied"' in out
    assert posted and all(SECRET not in message for message in posted)
    assert len(cookies) >= 6 and all(len(value) >= 32 for value in cookies)
    places = {
        "structlog": repr(events),
        "stdout (audit trail)": out,
        "stderr": err,
        "stdlib": "\n".join(r.getMessage() for r in caplog.records),
        "pages and metrics": "\n".join(pages),
        "webhook": "\n".join(posted),
    }
    for where, text in places.items():
        assert SECRET not in text and SECRET[:16] not in text, where
        # A CSRF token is on its own person's pages (the forms), nowhere else.
        shown = cookies[3:] if where == "pages and metrics" else cookies
        for secret in (*tokens, *shown):
            assert secret[-16:] not in text, where
    # The MCP answers carry no token either (the run call's result is the caller's own echo).
    for secret in tokens:
        assert all(secret[-16:] not in answer for answer in answers)
