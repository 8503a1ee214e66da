"""Human approval through HTTP (issue 46, docs/policy.md#approvals): a call a rule holds runs
once, exactly as a person approved it at the gateway's approval page, whichever form the client
can follow (2026-07-28 URL elicitation, 2025-11-25 -32042, a tool error with the page's URL)."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.jsonkit.write import canonical
from tests.support.approval_stack import (
    APPROVAL_KEY,
    POLICY,
    ApprovalStack,
    approval_stack,
    decide,
)
from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.login_stack import HttpBrowser, csrf_of, sign_in
from tests.support.upstreams import ModernUpstream, echo_tool

ARGS = {"text": "drop table", "secret": "hunter2-value"}


@pytest.fixture
async def stack(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ApprovalStack]:
    audit = {"audit": {"sink": "file", "path": str(tmp_path / "audit.jsonl")}}
    async with approval_stack(tmp_path, aiohttp_server, monkeypatch, gateway=audit) as running:
        yield running


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as client:
        yield client


def browser(session: aiohttp.ClientSession, stack: ApprovalStack) -> HttpBrowser:
    return HttpBrowser(session, stack.login.origin)


def result_of(text: str) -> dict[str, Any]:
    body = json.loads(text)
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


def error_of(text: str) -> dict[str, Any]:
    body = json.loads(text)
    assert "error" in body, body
    error: dict[str, Any] = body["error"]
    return error


def audit_events(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def first_round(stack: ApprovalStack, person: str, tool: str, args: Any) -> dict[str, Any]:
    status, _, text = await stack.call(person, tool, args)
    assert status == 200, text
    first = result_of(text)
    assert first["resultType"] == "input_required", first
    return first


def link_of(first: dict[str, Any]) -> str:
    request = first["inputRequests"][APPROVAL_KEY]
    assert request["method"] == "elicitation/create" and request["params"]["mode"] == "url"
    return str(request["params"]["url"])


async def test_a_url_elicitation_is_approved_by_the_caller_and_the_call_runs_once(
    stack: ApprovalStack, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    first = await first_round(stack, "alice", "wipe", ARGS)
    link = link_of(first)
    assert link.startswith(stack.login.url("/approve/")) and "alice" not in link
    assert stack.runs("wipe") == []  # nothing went upstream
    alice = browser(session, stack)
    status, page = await decide(alice, stack, link, "alice", decision="none")
    assert status == 400  # no decision: nothing changes
    status, _, page = await alice.get(link)
    assert status == 200 and '<p id="state">State: waiting for a decision</p>' in page
    preview = {"secret": "[redacted]", "text": "drop table"}
    assert "hunter2" not in page and canonical(preview).decode() in page.replace("&quot;", '"')
    assert hashlib.sha256(canonical(preview)).hexdigest() in page
    status, done = await decide(alice, stack, link, "alice")
    assert status == 200 and 'id="decided">Approved' in done
    status, _, text = await stack.retry("alice", "wipe", ARGS, first["requestState"])
    assert status == 200, text
    assert result_of(text)["structuredContent"] == {"echo": ARGS}
    assert stack.runs("wipe") == [ARGS]
    # A replayed retry: the approval is used up.
    status, headers, text = await stack.retry("alice", "wipe", ARGS, first["requestState"])
    assert (status, error_of(text)["code"]) == (403, -31403)
    assert error_of(text)["data"] == {"reason": "used"} and "WWW-Authenticate" not in headers
    assert stack.runs("wipe") == [ARGS]
    events = [e for e in audit_events(tmp_path) if e["event"].startswith("approval_")]
    assert [e["event"] for e in events] == [
        "approval_requested",
        "approval_approved",
        "approval_executed",
    ]
    assert len({e["approval"] for e in events}) == 1 and events[2]["outcome"] == "ok"
    assert "hunter2" not in (tmp_path / "audit.jsonl").read_text()


async def test_a_retry_waits_for_the_decision_and_asks_again_while_pending(
    stack: ApprovalStack,
) -> None:
    first = await first_round(stack, "alice", "wipe", ARGS)
    status, _, text = await stack.retry("alice", "wipe", ARGS, first["requestState"])
    again = result_of(text)  # still pending after approvals.wait_s: the same link again
    assert status == 200 and again["resultType"] == "input_required"
    assert link_of(again) == link_of(first) and stack.runs("wipe") == []
    status, _, text = await stack.retry(
        "alice", "wipe", ARGS, again["requestState"], {"action": "decline"}
    )
    declined = result_of(text)
    assert declined["isError"] is True and "was not approved" in declined["content"][0]["text"]
    assert stack.runs("wipe") == []


@pytest.mark.row("approval_refused")
async def test_a_form_answer_a_denial_and_changed_arguments_are_refused(
    stack: ApprovalStack, session: aiohttp.ClientSession
) -> None:
    first = await first_round(stack, "alice", "wipe", ARGS)
    form = {"action": "accept", "content": {"approve": True}}
    status, headers, text = await stack.retry("alice", "wipe", ARGS, first["requestState"], form)
    assert (status, error_of(text)["code"], error_of(text)["data"]) == (
        403,
        -31403,
        {"reason": "form_answer"},
    )
    assert headers["Cache-Control"] == "no-store" and "WWW-Authenticate" not in headers
    # Changed arguments: the sealed state is bound to the first call's.
    status, _, text = await stack.retry(
        "alice", "wipe", {**ARGS, "text": "drop all"}, first["requestState"]
    )
    assert status == 400 and error_of(text)["code"] == -32602
    status, done = await decide(browser(session, stack), stack, link_of(first), "alice", "deny")
    assert status == 200 and "Denied" in done
    status, _, text = await stack.retry("alice", "wipe", ARGS, first["requestState"])
    assert (status, error_of(text)["data"]) == (403, {"reason": "denied"})
    assert stack.runs("wipe") == []


async def test_an_approval_is_for_its_policy_version(
    stack: ApprovalStack, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    first = await first_round(stack, "alice", "wipe", ARGS)
    await decide(browser(session, stack), stack, link_of(first), "alice")
    policy = stack.login.stack.config_path.parent / "policy.yaml"
    policy.write_text(policy.read_text().replace("ttl_s: 60, preview", "ttl_s: 61, preview"))
    source = stack.login.stack.server.services.policy
    source.reload()  # type: ignore[union-attr]
    status, _, text = await stack.retry("alice", "wipe", ARGS, first["requestState"])
    assert (status, error_of(text)["data"]) == (403, {"reason": "changed"})
    assert stack.runs("wipe") == []


async def test_an_expired_approval_is_refused(
    stack: ApprovalStack, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    first = await first_round(stack, "alice", "wipe", ARGS)
    await decide(browser(session, stack), stack, link_of(first), "alice")
    real = stack.desk._clock
    stack.desk._clock = lambda: real() + 3600  # an hour later, past ttl_s
    status, _, text = await stack.retry("alice", "wipe", ARGS, first["requestState"])
    assert (status, error_of(text)["data"]) == (403, {"reason": "expired"})
    assert stack.runs("wipe") == []
    assert [e["event"] for e in audit_events(tmp_path)].count("approval_expired") == 1


@pytest.mark.row("approval_required")
async def test_a_2025_11_25_client_gets_the_link_and_the_same_call_runs_once_approved(
    stack: ApprovalStack, session: aiohttp.ClientSession
) -> None:
    token = stack.token("alice")
    status, headers, text = await stack.login.stack.legacy_call(
        token,
        "wipe",
        ARGS,
        capabilities={"elicitation": {"url": {}}},
        headers={"MCP-Protocol-Version": "2025-11-25"},
    )
    assert status == 200 and headers["Cache-Control"] == "no-store"
    error = error_of(text)
    assert error["code"] == -32042
    (elicitation,) = error["data"]["elicitations"]
    assert elicitation["mode"] == "url" and elicitation["elicitationId"]
    await decide(browser(session, stack), stack, elicitation["url"], "alice")
    params = {"name": "wipe", "arguments": ARGS}
    version = {"MCP-Protocol-Version": "2025-11-25"}
    status, _, text = await stack.login.stack.legacy(token, "tools/call", params, headers=version)
    assert status == 200 and result_of(text)["structuredContent"] == {"echo": ARGS}
    # The same call again needs another approval: nothing runs.
    status, _, text = await stack.login.stack.legacy(token, "tools/call", params, headers=version)
    assert error_of(text)["code"] == -32042 and stack.runs("wipe") == [ARGS]


async def test_a_client_that_cannot_elicit_gets_the_page_in_a_tool_error(
    stack: ApprovalStack, session: aiohttp.ClientSession
) -> None:
    token = stack.token("alice")
    status, _, text = await stack.login.stack.legacy_call(token, "wipe", ARGS)
    result = result_of(text)
    assert status == 200 and result["isError"] is True
    message = result["content"][0]["text"]
    url = message.split(" at ", 1)[1].split(" ", 1)[0]
    assert url.startswith(stack.login.url("/approve/"))
    await decide(browser(session, stack), stack, url, "alice")
    # Another person's same call is not approved by it.
    status, _, text = await stack.login.stack.legacy_call(stack.token("bob"), "wipe", ARGS)
    assert result_of(text)["isError"] is True and stack.runs("wipe") == []
    status, _, text = await stack.login.stack.legacy_call(token, "wipe", ARGS)
    assert result_of(text)["structuredContent"] == {"echo": ARGS}
    assert stack.runs("wipe") == [ARGS]


@pytest.mark.row("approval_forbidden")
async def test_an_approver_group_decides_and_no_one_else(
    stack: ApprovalStack, session: aiohttp.ClientSession
) -> None:
    first = await first_round(stack, "alice", "pay", {"text": "100 EUR"})
    link = link_of(first)
    for person in ("carol", "alice"):  # not in the group; the caller herself
        status, page = await decide(HttpBrowser(session, stack.login.origin), stack, link, person)
        assert status == 403 and "You may not decide this request" in page, person
    bob = HttpBrowser(session, stack.login.origin)
    await sign_in(bob, stack.login, "bob")
    status, _, page = await bob.get(stack.login.url("/approvals"))
    assert status == 200 and link.removeprefix(stack.login.origin) in page
    status, done = await decide(bob, stack, link, "bob")
    assert status == 200 and "Approved" in done
    status, _, page = await bob.get(stack.login.url("/approvals"))
    assert 'id="none"' in page
    status, _, text = await stack.retry("alice", "pay", {"text": "100 EUR"}, first["requestState"])
    assert result_of(text)["structuredContent"] == {"echo": {"text": "100 EUR"}}


@pytest.mark.row("approval_closed")
async def test_a_second_decision_is_refused(
    stack: ApprovalStack, session: aiohttp.ClientSession
) -> None:
    first = await first_round(stack, "alice", "wipe", ARGS)
    alice = browser(session, stack)
    await sign_in(alice, stack.login, "alice")
    status, _, page = await alice.get(link_of(first))
    csrf = csrf_of(page)
    assert (await alice.post(link_of(first), {"csrf": csrf, "decision": "approve"}))[0] == 200
    status, headers, page = await alice.post(link_of(first), {"csrf": csrf, "decision": "deny"})
    assert status == 409 and "no longer waiting" in page
    assert headers["Content-Type"] == "text/html; charset=utf-8"


@pytest.mark.row("approval_unavailable")
async def test_without_the_login_surface_a_held_call_fails_closed(make_stack: MakeStack) -> None:
    upstream = ModernUpstream(tools=[echo_tool("wipe")])
    async with make_stack(upstream=upstream, policy=POLICY) as live:
        status, headers, text = await live.call(live.token(scopes="mcp:access"), "wipe", ARGS)
        assert status == 503 and headers["Retry-After"] == "2"
        assert headers["Cache-Control"] == "no-store"
        assert json.loads(text) == {
            "error": "approval_unavailable",
            "error_description": "Approvals are unavailable right now, retry later",
        }
        assert upstream.calls("tools/call") == []


async def test_an_approval_is_for_its_tools_definition(
    stack: ApprovalStack, session: aiohttp.ClientSession
) -> None:
    """The catalog pin: the tool's definition changed after the approval (its backend announced
    a new list), so the approval is for another tool than the one the call would reach."""
    first = await first_round(stack, "alice", "wipe", ARGS)
    await decide(browser(session, stack), stack, link_of(first), "alice")
    stack.upstream.tools[1] = {**stack.upstream.tools[1], "description": "wipes everything"}
    backend = stack.login.stack.server.services.backend
    for _ in range(200):
        stack.upstream.announce()
        tool = backend.catalog().get("wipe")
        if tool is not None and tool.definition.get("description") == "wipes everything":
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the catalog never took the new definition")
    status, _, text = await stack.retry("alice", "wipe", ARGS, first["requestState"])
    assert (status, error_of(text)["data"]) == (403, {"reason": "changed"})
    assert stack.runs("wipe") == []


async def test_another_person_cannot_decide_a_callers_own_request(
    stack: ApprovalStack, session: aiohttp.ClientSession
) -> None:
    first = await first_round(stack, "alice", "wipe", ARGS)
    link = link_of(first)
    alice, bob = browser(session, stack), browser(session, stack)
    await sign_in(alice, stack.login, "alice")
    status, _, page = await alice.get(link)
    csrf = csrf_of(page)
    await sign_in(bob, stack.login, "bob")
    status, _, page = await bob.get(link)
    assert status == 403 and "hunter2" not in page and "drop table" not in page
    bobs = csrf_of((await bob.get(stack.login.url("/account")))[2])
    status, _, _ = await bob.post(link, {"csrf": bobs, "decision": "approve"})
    assert status == 403
    status, _, _ = await bob.post(link, {"csrf": csrf, "decision": "approve"})  # alice's token
    assert status == 403
    status, _, text = await stack.retry("alice", "wipe", ARGS, first["requestState"])
    assert result_of(text)["resultType"] == "input_required" and stack.runs("wipe") == []
    assert 'id="none"' in (await bob.get(stack.login.url("/approvals")))[2]


async def test_in_a_2025_03_26_batch_only_the_held_member_is_refused(make_stack: MakeStack) -> None:
    upstream = ModernUpstream(tools=[echo_tool("echo"), echo_tool("wipe")])
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "wipe"}},
    ]
    async with make_stack(upstream=upstream, policy=POLICY) as live:
        token = live.token(scopes="mcp:access")
        status, _, text = await live.post(token, batch, {"MCP-Protocol-Version": "2025-03-26"})
        assert status == 200, text
        first, second = json.loads(text)
        assert first["id"] == 1 and first["result"]["isError"] is False
        assert second == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32603,
                "message": "Approvals are unavailable right now, retry later",
            },
        }
        assert [r.json["params"]["name"] for r in upstream.calls("tools/call")] == ["echo"]
