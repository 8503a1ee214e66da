"""SECURITY: what a guardrail is shown (arguments, results, answers) and what it answers (a
change, a reason) reach only the processor, the backend (as changed) and the client; never a log
line, the audit trail, a metric or a span. The caller's token reaches no processor; the gateway's
credential at the processor reaches nothing else.

Driven through HTTP with a real processor that changes, refuses (with a reason), fails and
times out, on arguments, results, a prompt and a read, with ``logging.log_arguments`` on (the
access line then has the arguments' shape, never their values). Every log event (structlog),
everything printed (the JSON access lines and audit events on stdout), the stdlib logs and the
metrics are searched for each marker.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.guardrail_service import Faults, GuardrailService, guardrail_service
from tests.support.live_stack import MakeStack, ServerFactory, peer_section
from tests.support.printed import Printed
from tests.support.upstreams import ModernUpstream, echo_tool

ARGUMENT = "ARGUMENT-MARKER-7d41"
RESULT = "RESULT-MARKER-0c9e"
CHANGED = "CHANGED-MARKER-55aa"
REASON = "REASON-MARKER-e3f1"
GUARD_SECRET = "guard-credential-MARKER-9b20"
POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: [tools:echo], guardrails: [pii]}
prompts:
  greet: {scopes: [], guardrails: [pii]}
resources:
  "file:///**": {scopes: [], guardrails: [pii]}
"""
URI = "file:///a.txt"


def _decide(message: dict[str, Any]) -> dict[str, Any]:
    content = json.dumps(message.get("mcpRequest", message.get("mcpResponse")))
    if "refuse" in content:
        return {"error": {"code": "PERMISSION_DENIED", "reason": f"{REASON} {ARGUMENT}"}}
    if ARGUMENT in content or RESULT in content:
        changed = content.replace(ARGUMENT, CHANGED).replace(RESULT, CHANGED)
        return {"mutated": json.loads(changed)}
    return {"pass": {}}


async def test_content_and_reasons_reach_no_log_audit_event_or_metric(
    aiohttp_server: ServerFactory,
    make_stack: MakeStack,
    monkeypatch: pytest.MonkeyPatch,
    leaks: Printed,
) -> None:
    upstream = ModernUpstream(
        tools=[echo_tool("echo")],
        answers={
            "prompts/list": {"prompts": [{"name": "greet"}]},
            "prompts/get": {
                "messages": [{"role": "user", "content": {"type": "text", "text": RESULT}}]
            },
            "resources/list": {"resources": [{"uri": URI, "name": "a"}]},
            "resources/templates/list": {"resourceTemplates": []},
            "resources/read": {"contents": [{"uri": URI, "text": RESULT}]},
        },
    )
    service = GuardrailService(_decide, f"Bearer {GUARD_SECRET}")
    answers: list[str] = []
    async with guardrail_service(aiohttp_server, service) as g:
        pii = peer_section(monkeypatch, g.url, "GUARD_TOKEN", GUARD_SECRET, timeout_s=0.3)
        gateway = {
            "guardrails": {"pii": pii},
            "audit": {"sink": "stdout"},
            "logging": {"format": "json", "log_arguments": True},
        }
        async with make_stack(
            upstream=upstream,
            policy=POLICY,
            gateway=gateway,
        ) as stack:
            token = stack.token()

            async def send(*answer: Any) -> None:
                answers.append(f"{answer[0]} {answer[2]}")

            await send(*await stack.call(token, "echo", {"text": ARGUMENT}))
            await send(*await stack.call(token, "echo", {"text": "refuse"}))
            await send(*await stack.legacy_call(token, "echo", {"text": ARGUMENT}))
            await send(*await stack.modern(token, "prompts/get", {"name": "greet"}))
            await send(*await stack.modern(token, "resources/read", {"uri": URI}))
            g.faults = Faults(body=b'{"pass": {}, "pass": {}}')
            await send(*await stack.call(token, "echo", {"text": ARGUMENT}))
            g.faults = Faults(delay_s=2.0)
            await send(*await stack.call(token, "echo", {"text": ARGUMENT}))
            async with stack.session.get(stack.server.ops_url + "/metrics") as response:
                metrics = await response.text()
            received = "\n".join(repr(r.body) for r in upstream.requests)
    statuses = [answer[:3] for answer in answers]
    assert statuses == ["200", "403", "200", "200", "200", "403", "403"], answers
    # Positive controls: the processor saw the content, the client the change and the reason.
    assert any(ARGUMENT in json.dumps(seen.body) for seen in g.seen)
    assert CHANGED in received and ARGUMENT not in received
    assert CHANGED in answers[0] and REASON in answers[1] and CHANGED in answers[3]
    output = leaks.written()
    assert '"event":"tool_call"' in output and '"guardrails":' in output
    assert '"arguments":{"text":"string"}' in output  # log_arguments: the shape only
    haystacks = {
        "structlog leaks.events": repr(leaks.events),
        "stdout/stderr (access lines, audit trail)": output,
        "stdlib logs": leaks.logged(),
        "metrics": metrics,
    }
    for where, text in haystacks.items():
        for marker in (ARGUMENT, RESULT, CHANGED, REASON, GUARD_SECRET, token):
            assert marker not in text, f"{marker} leaked into {where}"
    for seen in g.seen:
        assert token not in f"{seen.headers!r} {seen.body!r}"  # never the caller's token
        assert seen.headers["Authorization"] == f"Bearer {GUARD_SECRET}"
    assert all(GUARD_SECRET not in answer for answer in answers)
    assert GUARD_SECRET not in received
