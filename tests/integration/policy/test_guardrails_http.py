"""Guardrails (``guardrails:``) through the whole stack: the dev issuer's tokens, the real
gateway, a real upstream and a small real processor (:mod:`tests.support.guardrail_service`) on
loopback that records every message.

A rule's processors see a ``tools/call``'s arguments before the backend does and its result
before the client does, and a ``prompts/get`` / ``resources/read`` result; each verdict passes,
denies (403 ``guardrail_denied`` without a challenge, the processor's reason in ``data``) or
changes the content, and a change is checked again (the tool's ``inputSchema``, the result
checks, the rule's ``override:`` and ``when:``). A slow or failing processor denies by default
within its deadline; ``on_error: allow`` lets content pass unchecked. A rule without guardrails
never asks anyone.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.guardrail_service import (
    Faults,
    GuardrailService,
    deny_containing,
    guardrail_service,
    redact,
    replace_with,
)
from tests.support.jwt_stack import metric
from tests.support.live_stack import (
    LiveStack,
    ServerFactory,
    audit_events,
    live_stack,
    peer_section,
)
from tests.support.upstreams import ModernUpstream, echo_tool

POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: [tools:echo], guardrails: [pii]}
  plain: {scopes: [tools:echo]}
  pinned:
    scopes: [tools:echo]
    guardrails: [pii]
    override: {arguments: {fixed: {mode: safe}}}
  small:
    scopes: [tools:echo]
    guardrails: [pii]
    when: 'arguments.text.size() < 10'
prompts:
  greet: {scopes: [], guardrails: [pii]}
resources:
  "file:///**": {scopes: [], guardrails: [pii]}
"""
GUARD_SECRET = "guardrail-service-credential-0451"
SECRET = "SSN-123-45-6789"
URI = "file:///docs/a.txt"
DENIED = "Denied by guardrail 'pii'"


def _upstream() -> ModernUpstream:
    text = {"type": "text", "text": f"hello {SECRET}"}
    pinned = echo_tool(
        "pinned",
        additionalProperties=False,
        properties={"text": {"type": "string"}, "mode": {"type": "string"}},
    )
    return ModernUpstream(
        tools=[echo_tool("echo"), echo_tool("plain"), pinned, echo_tool("small")],
        answers={
            "prompts/list": {"prompts": [{"name": "greet"}]},
            "prompts/get": {"messages": [{"role": "user", "content": text}]},
            "resources/list": {"resources": [{"uri": URI, "name": "a"}]},
            "resources/templates/list": {"resourceTemplates": []},
            "resources/read": {"contents": [{"uri": URI, "text": f"doc {SECRET}"}]},
        },
    )


@asynccontextmanager
async def _stack(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    service: GuardrailService,
    **processor: Any,
) -> AsyncIterator[tuple[LiveStack, ModernUpstream]]:
    upstream = _upstream()
    claims = {"claims": ["tid", "org.unit", "absent"], **processor}
    settings = peer_section(monkeypatch, service.url, "GUARD_TOKEN", GUARD_SECRET, **claims)
    gateway = {
        "guardrails": {"pii": settings},
        "audit": {"sink": "file", "path": str(tmp_path / "audit.jsonl")},
    }
    async with live_stack(
        tmp_path, aiohttp_server, monkeypatch, upstream=upstream, policy=POLICY, gateway=gateway
    ) as stack:
        yield stack, upstream


def _refusal(status: int, headers: dict[str, str], text: str) -> dict[str, Any]:
    """The 403 ``guardrail_denied`` body's ``error.data`` (after the row's fixed parts)."""
    assert status == 403, text
    assert "WWW-Authenticate" not in headers  # the client must not step up
    assert headers["Cache-Control"] == "no-store"
    error = json.loads(text)["error"]
    assert (error["code"], error["message"]) == (-31403, DENIED)
    return error["data"]  # type: ignore[no-any-return]


def _sent(upstream: ModernUpstream) -> list[dict[str, Any]]:
    return [r.json["params"]["arguments"] for r in upstream.calls("tools/call")]


@pytest.mark.row("guardrail_denied")
async def test_a_processor_passes_denies_and_changes_a_calls_arguments_in_both_eras(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def decide(message: dict[str, Any]) -> dict[str, Any]:
        if message["phase"] == "response":
            return {"pass": {}}
        text = message["mcpRequest"]["arguments"].get("text", "")
        if "forbidden" in text:
            reason = "no\x07 forbidden\u202e words"  # cleaned before the client sees it
            return {"error": {"code": "PERMISSION_DENIED", "reason": reason}}
        if SECRET in text:
            return redact(SECRET)(message)
        return {"pass": {}}

    async with (
        guardrail_service(aiohttp_server, GuardrailService(decide, f"Bearer {GUARD_SECRET}")) as g,
        _stack(tmp_path, aiohttp_server, monkeypatch, g) as (stack, upstream),
    ):
        token = stack.token()
        status, _, text = await stack.call(token, "echo", {"text": "fine"})
        assert status == 200 and json.loads(text)["result"]["isError"] is False, text
        # A change: the backend gets the redacted arguments, the client the answer to them.
        status, _, text = await stack.call(token, "echo", {"text": f"my {SECRET}"})
        assert status == 200 and SECRET not in text, text
        data = _refusal(*(await stack.call(token, "echo", {"text": "forbidden"})))
        assert data == {"guardrail": "pii", "verdict": "deny", "reason": "no forbidden words"}
        # A 2025 client gets the same HTTP-level answer, with its id.
        status, headers, text = await stack.legacy_call(token, "echo", {"text": "forbidden"})
        assert _refusal(status, headers, text)["verdict"] == "deny"
        assert json.loads(text)["id"] == 5
        assert _sent(upstream) == [{"text": "fine"}, {"text": "my [redacted]"}]
        # A rule without guardrails asks no one.
        asked = len(g.seen)
        assert (await stack.call(token, "plain", {"text": f"x {SECRET}"}))[0] == 200
        assert len(g.seen) == asked
        assert await metric(stack, "rejections_total", row="guardrail_denied") == 2
        labels = {"check": "tool_arguments", "guardrail": "pii"}
        assert await metric(stack, "guardrail_verdicts_total", **labels, verdict="pass") == 1
        assert await metric(stack, "guardrail_verdicts_total", **labels, verdict="mutate") == 1
        assert await metric(stack, "guardrail_verdicts_total", **labels, verdict="deny") == 2
        assert await metric(stack, "guardrail_duration_seconds_count", guardrail="pii") >= 5
        refused = [e for e in audit_events(stack) if e.get("error_row") == "guardrail_denied"]
        assert {e["outcome"] for e in refused} == {"denied"}
        assert [(e["decision"], e["guardrails"]) for e in refused] == [
            ("deny", [{"guardrail": "pii", "check": "tool_arguments", "verdict": "deny"}])
        ] * 2
        changed = [e for e in audit_events(stack) if e.get("outcome") == "ok"][1]
        assert changed["guardrails"] == [
            {"guardrail": "pii", "check": "tool_arguments", "verdict": "mutate"},
            {"guardrail": "pii", "check": "tool_result", "verdict": "pass"},
        ]


async def test_the_message_carries_facts_and_the_gateways_credential_never_the_token(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        guardrail_service(aiohttp_server) as g,
        _stack(tmp_path, aiohttp_server, monkeypatch, g) as (stack, _),
    ):
        now = int(time.time())
        token = stack.issuer.mint_signed(
            {
                "iss": stack.issuer.url,
                "sub": "erin",
                "aud": stack.config.resource,
                "iat": now,
                "exp": now + 300,
                "client_id": "demo-cli",
                "scope": "mcp:access tools:echo",
                "tid": "t-1",
                "org": {"unit": "r&d"},
            },
            header={"typ": "at+jwt"},
        )
        status, _, text = await stack.call(token, "echo", {"text": "hi"})
        assert status == 200, text
        request, response = g.seen
        assert request.headers["Authorization"] == f"Bearer {GUARD_SECRET}"
        assert request.headers["Content-Type"] == "application/json"
        assert all(token not in f"{seen.headers} {seen.body}" for seen in g.seen)
        context = request.body["metadataContext"]
        assert context.pop("requestId") == request.headers["X-Request-ID"]
        assert len(context.pop("catalogPin")) == 64
        assert context == {
            "check": "tool_arguments",
            "target": "echo",
            "backend": "default",
            "rule": "echo",
            "policyVersion": stack.server.services.policy.current().version,
            "principal": {
                "issuer": stack.issuer.url,
                "subject": "erin",
                "clientId": "demo-cli",
                "claims": {"tid": "t-1", "org.unit": "r&d"},
            },
        }
        assert request.body["phase"] == "request" and request.body["method"] == "tools/call"
        assert request.body["serviceNames"] == ["default"]
        assert request.body["mcpRequest"] == {"name": "echo", "arguments": {"text": "hi"}}
        assert response.body["phase"] == "response" and "mcpRequest" not in response.body
        assert response.body["mcpResponse"]["content"][0]["text"] == '{"text": "hi"}'
        assert response.check == "tool_result"


async def test_a_processor_denies_and_changes_results_of_tools_prompts_and_reads(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        guardrail_service(aiohttp_server) as g,
        _stack(tmp_path, aiohttp_server, monkeypatch, g) as (stack, upstream),
    ):
        token = stack.token()
        g.decide = redact(SECRET)
        status, _, text = await stack.call(token, "echo", {"text": "x"})
        assert status == 200, text
        status, _, text = await stack.modern(token, "prompts/get", {"name": "greet"})
        assert status == 200 and SECRET not in text and "hello [redacted]" in text, text
        status, _, text = await stack.modern(token, "resources/read", {"uri": URI})
        assert status == 200 and SECRET not in text and "doc [redacted]" in text, text
        g.decide = deny_containing(SECRET, "leaks an identifier")
        status, headers, text = await stack.modern(token, "prompts/get", {"name": "greet"})
        assert _refusal(status, headers, text)["reason"] == "leaks an identifier"
        status, headers, text = await stack.modern(token, "resources/read", {"uri": URI})
        assert _refusal(status, headers, text)["reason"] == "leaks an identifier"
        # The tool ran (its effects stand); its result is withheld.
        g.decide = lambda message: (
            {"error": {"code": "INVALID"}} if message["phase"] == "response" else {"pass": {}}
        )
        before = len(upstream.calls("tools/call"))
        status, headers, text = await stack.call(token, "echo", {"text": SECRET})
        assert _refusal(status, headers, text)["verdict"] == "deny"
        assert len(upstream.calls("tools/call")) == before + 1
        assert SECRET not in text
        withheld = [e for e in audit_events(stack) if e.get("tool") == "echo"][-1]
        assert (withheld["decision"], withheld["outcome"]) == ("deny", "denied")
        assert withheld["backend_ms"] is not None  # it ran
        checks = [(s.check, s.body["method"]) for s in g.seen]
        assert ("prompt_result", "prompts/get") in checks
        assert ("resource_result", "resources/read") in checks
        assert (
            await metric(
                stack,
                "surface_requests_total",
                method="prompts/get",
                outcome="denied",
                rule="greet",
            )
            == 1
        )


@pytest.mark.parametrize(
    ("tool", "arguments", "change"),
    [
        ("echo", {"text": "a"}, {"name": "echo", "arguments": {"steps": "not a number"}}),
        ("echo", {"text": "a"}, {"name": "plain", "arguments": {"text": "a"}}),
        ("echo", {"text": "a"}, {"name": "echo", "arguments": ["a"]}),
        ("pinned", {"text": "a"}, {"name": "pinned", "arguments": {"text": "a", "mode": "x"}}),
        ("pinned", {"text": "a"}, {"name": "pinned", "arguments": {"text": "a", "Mode": "x"}}),
    ],
    ids=["breaks-schema", "other-tool", "not-an-object", "sets-a-fixed-one", "near-miss"],
)
async def test_a_change_to_the_arguments_that_is_not_valid_is_refused(  # noqa: PLR0917
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    tool: str,
    arguments: dict[str, Any],
    change: dict[str, Any],
) -> None:
    def decide(message: dict[str, Any]) -> dict[str, Any]:
        return {"mutated": change} if message["phase"] == "request" else {"pass": {}}

    async with (
        guardrail_service(aiohttp_server, GuardrailService(decide)) as g,
        _stack(tmp_path, aiohttp_server, monkeypatch, g) as (stack, upstream),
    ):
        status, headers, text = await stack.call(stack.token(), tool, arguments)
        assert _refusal(status, headers, text) == {"guardrail": "pii", "verdict": "invalid"}
        assert upstream.calls("tools/call") == []
        event = [e for e in audit_events(stack) if e.get("tool") == tool][-1]
        assert event["guardrails"][-1]["verdict"] in ("invalid", "mutate")


async def test_changed_arguments_meet_the_rules_conditions_and_fixed_ones_stay(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    grown = {"mutated": {"name": "small", "arguments": {"text": "far longer than ten"}}}

    def decide(message: dict[str, Any]) -> dict[str, Any]:
        if message["phase"] == "response":
            return {"pass": {}}
        if message["metadataContext"]["target"] == "small":
            return grown
        return {"mutated": {"name": "pinned", "arguments": {"text": "changed"}}}

    async with (
        guardrail_service(aiohttp_server, GuardrailService(decide)) as g,
        _stack(tmp_path, aiohttp_server, monkeypatch, g) as (stack, upstream),
    ):
        token = stack.token()
        # A processor cannot widen the policy: the changed call must meet when: too.
        status, headers, text = await stack.call(token, "small", {"text": "short"})
        assert status == 403 and "WWW-Authenticate" not in headers, text
        assert json.loads(text)["error"]["data"] == {"rule": "small"}  # condition_denied
        # The override's fixed argument is the gateway's, added after the processors.
        assert (await stack.call(token, "pinned", {"text": "a"}))[0] == 200
        assert _sent(upstream) == [{"text": "changed", "mode": "safe"}]
        assert g.seen[-2].body["mcpRequest"]["arguments"] == {"text": "a"}


async def test_a_change_to_a_result_that_is_not_valid_is_refused(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        guardrail_service(aiohttp_server, GuardrailService(replace_with({"content": "x"}))) as g,
        _stack(
            tmp_path,
            aiohttp_server,
            monkeypatch,
            g,
            checks=["tool_result", "resource_result", "prompt_result"],
        ) as (stack, _),
    ):
        token = stack.token()
        for answer in (
            await stack.call(token, "echo", {"text": "a"}),
            await stack.modern(token, "prompts/get", {"name": "greet"}),
            await stack.modern(token, "resources/read", {"uri": URI}),
        ):
            assert _refusal(*answer) == {"guardrail": "pii", "verdict": "invalid"}
        g.decide = replace_with({"contents": [{"uri": URI, "blob": "not base64!"}]})
        status, headers, text = await stack.modern(token, "resources/read", {"uri": URI})
        assert _refusal(status, headers, text)["verdict"] == "invalid"
        # Only the configured checks are shown: never the arguments here.
        assert "tool_arguments" not in g.checks()


@pytest.mark.parametrize(
    "faults",
    [
        Faults(delay_s=5.0),
        Faults(status=500),
        Faults(body=b'{"pass": {}, "error": {}}'),
        Faults(body=b'{"pass": {}, "pass": {}}'),
        Faults(body=b'{"pass": {}}', content_type="text/plain"),
        Faults(body=b'{"error": "not an object"}'),
    ],
    ids=["slow", "500", "two-verdicts", "duplicate-member", "not-json", "bad-refusal"],
)
async def test_a_slow_or_failing_processor_denies_by_default_within_its_deadline(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch, faults: Faults
) -> None:
    async with (
        guardrail_service(aiohttp_server, GuardrailService(faults=faults)) as g,
        _stack(tmp_path, aiohttp_server, monkeypatch, g, timeout_s=0.3) as (stack, upstream),
    ):
        began = time.monotonic()
        status, headers, text = await stack.call(stack.token(), "echo", {"text": "a"})
        assert time.monotonic() - began < 2.0  # its 0.3 s deadline, not the request's 15 s
        assert _refusal(status, headers, text) == {"guardrail": "pii", "verdict": "unavailable"}
        assert upstream.calls("tools/call") == []
        reason = {"slow": "timeout", "500": "status"}.get(
            str(faults.status or ("slow" if faults.delay_s else "")), "malformed"
        )
        assert await metric(stack, "guardrail_errors_total", guardrail="pii", reason=reason) == 1
        event = [e for e in audit_events(stack) if e.get("tool") == "echo"][-1]
        assert event["guardrails"] == [
            {"guardrail": "pii", "check": "tool_arguments", "verdict": "error"}
        ]


async def test_on_error_allow_lets_content_pass_unchecked_and_says_so(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        guardrail_service(aiohttp_server, GuardrailService(faults=Faults(status=503))) as g,
        _stack(tmp_path, aiohttp_server, monkeypatch, g, on_error="allow") as (stack, upstream),
    ):
        status, _, text = await stack.call(stack.token(), "echo", {"text": "a"})
        assert status == 200 and json.loads(text)["result"]["isError"] is False, text
        assert _sent(upstream) == [{"text": "a"}]
        event = [e for e in audit_events(stack) if e.get("tool") == "echo"][-1]
        assert event["guardrails"] == [
            {"guardrail": "pii", "check": check, "verdict": "error", "fallback": "allow"}
            for check in ("tool_arguments", "tool_result")
        ]
        labels = {"check": "tool_result", "guardrail": "pii", "verdict": "error"}
        assert await metric(stack, "guardrail_verdicts_total", **labels) == 1


async def test_only_the_refused_member_of_a_batch_gets_the_error(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "a"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": SECRET}},
        },
    ]
    async with (
        guardrail_service(aiohttp_server, GuardrailService(deny_containing(SECRET))) as g,
        _stack(tmp_path, aiohttp_server, monkeypatch, g) as (stack, upstream),
    ):
        token = stack.token()
        await stack.legacy_initialize(token, version="2025-03-26")
        status, _, text = await stack.post(token, batch, {"MCP-Protocol-Version": "2025-03-26"})
        assert status == 200, text
        first, second = json.loads(text)
        assert first["id"] == 1 and first["result"]["isError"] is False
        assert second == {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -31403,
                "message": DENIED,
                "data": {"guardrail": "pii", "verdict": "deny", "reason": "contains a secret"},
            },
        }
        assert _sent(upstream) == [{"text": "a"}]
        events = [e for e in audit_events(stack) if e.get("tool") == "echo"]
        assert [e.get("guardrails", [{}])[0].get("verdict") for e in events] == ["pass", "deny"]
