"""``when:`` conditions (CEL) through the whole stack (issue 25): the dev issuer's signed tokens
carrying ``groups``, ``roles`` and ``tid``, checked as JWTs and by introspection, the real
gateway and a real upstream on loopback.

A condition refusal is 403 ``condition_denied`` naming the rule, never a claim value, and with
no ``WWW-Authenticate`` challenge: more scopes would not help, so no step-up loop. A condition
that cannot be evaluated denies the same way (never 500, never allow), is logged once and
counted. ``tools/list`` decides the conditions that do not read ``arguments``.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest
import structlog
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from gateway.policy import conditions
from tests.support.live_stack import LiveStack, MakeStack, ServerFactory, live_stack
from tests.support.sdk_stack import sdk_stack
from tests.support.upstreams import ModernUpstream, echo_tool

POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  restart_service:
    scopes: [ops]
    description: SREs of tenant t-1; prod restarts only by the on-call group
    when:
      - '"sre" in claims.groups'
      - 'claims.tid == "t-1"'
      - 'arguments.text != "prod" || "oncall" in claims.groups'
  audit_log:
    scopes: []
    when: 'claims.department == "security"'
  notes_write:
    scopes: []
    when: 'has(claims.roles) && "Notes.Writer" in claims.roles && client_id == "demo-cli"'
  closed_door:
    scopes: []
    when: 'now < timestamp("2001-01-01T00:00:00Z")'
  open_door:
    scopes: []
    when: 'now > timestamp("2001-01-01T00:00:00Z") && request.ip == "127.0.0.1"'
  office_hours:
    scopes: []
    when: 'now.getDayOfWeek() >= 1 && now.getDayOfWeek() <= 5 && now.getHours() >= 8 &&
      now.getHours() < 18'
"""
TOOLS = ["restart_service", "audit_log", "notes_write", "closed_door", "open_door", "office_hours"]
SECRET_TENANT = "t-2-s3cr3t-tenant"
SECRET_DEPARTMENT = "dept-s3cr3t-value"
TOKENS = pytest.mark.parametrize("tokens", ["introspection", "jwt"])


def _token(stack: LiveStack, sub: str, **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": stack.issuer.url,
        "sub": sub,
        "aud": stack.config.resource,
        "iat": now,
        "exp": now + 300,
        "client_id": "demo-cli",
        "scope": "mcp:access ops",
        **claims,
    }
    return stack.issuer.mint_signed(body, header={"typ": "at+jwt"})


def _sample(metrics: str, name: str, **labels: str) -> float | None:
    for line in metrics.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


async def _listed(stack: LiveStack, token: str) -> list[str]:
    status, _, text = await stack.modern(token, "tools/list")
    assert status == 200, text
    return sorted(tool["name"] for tool in json.loads(text)["result"]["tools"])


async def _refused(stack: LiveStack, token: str, tool: str, arguments: dict[str, Any]) -> str:
    status, headers, text = await stack.call(token, tool, arguments)
    assert status == 403, text
    assert "WWW-Authenticate" not in headers  # no step-up: scopes would not help
    error = json.loads(text)["error"]
    assert error["code"] == -31403
    assert error["message"] == f"Denied by a policy condition of rule '{tool}'"
    assert error["data"] == {"rule": tool}
    return text


@TOKENS
@pytest.mark.row("condition_denied")
async def test_conditions_by_group_role_tenant_argument_and_time_in_both_token_modes(  # noqa: PLR0917 - pytest fixtures
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    tokens: str,
) -> None:
    used: list[str] = []
    bodies: list[str] = []
    upstream = ModernUpstream(tools=[echo_tool(name) for name in TOOLS])
    gateway = {"issuer": {"tokens": tokens}, "audit": {"sink": "stdout"}}
    monkeypatch.setattr(conditions, "wall_clock", lambda: 1796378400.0)  # Fri 10:00Z
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:
        await _scenario(tmp_path, aiohttp_server, monkeypatch, upstream, gateway, used, bodies)
    logged = capsys.readouterr()
    output = logged.out + logged.err
    errors = [event for event in events if event.get("event") == "condition_error"]
    assert len(errors) == 1, errors  # once per rule, with the reason (its position, no value)
    assert errors[0]["rule"] == "audit_log" and errors[0]["section"] == "tools"
    assert "no such key 'department'" in errors[0]["reason"]
    audit = [json.loads(line) for line in output.splitlines() if line.startswith('{"ts"')]
    refusals = [e for e in audit if e.get("error_row") == "condition_denied"]
    assert len(refusals) == 9
    assert [e["condition"] for e in refusals if e["tool"] == "audit_log"] == [
        "false",
        "error",
        "error",
    ]
    assert {e["condition"] for e in refusals if e["tool"] != "audit_log"} == {"false"}
    assert all(e["rule"] == e["tool"] and e["decision"] == "deny" for e in refusals)
    # Leak test: no claim value and no token (nor its signature, its encoded forms) in any
    # answer, log event, stdlib log record, audit event or output line.
    seen = "\n".join([*bodies, output, repr(events), caplog.text])
    assert SECRET_TENANT not in seen and SECRET_DEPARTMENT not in seen
    for token in used:
        signature = token.rsplit(".", 1)[1]
        for form in (token, quote_plus(token), signature[: max(16, len(signature) // 2)]):
            assert form not in seen


async def _scenario(  # noqa: PLR0917 - the test's fixtures, passed on
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    upstream: ModernUpstream,
    gateway: dict[str, Any],
    used: list[str],
    bodies: list[str],
) -> None:
    async with live_stack(
        tmp_path, aiohttp_server, monkeypatch, upstream=upstream, policy=POLICY, gateway=gateway
    ) as stack:
        sre = _token(stack, "sam", groups=["sre"], tid="t-1", roles=["Notes.Writer"])
        status, _, text = await stack.call(sre, "restart_service", {"text": "staging"})
        assert status == 200 and '"isError":false' in text.replace(" ", ""), text
        # Listing: the token-only conditions decide (audit_log errs: no department claim;
        # closed_door is false), the argument one waits for the call.
        assert await _listed(stack, sre) == [
            "notes_write",
            "office_hours",
            "open_door",
            "restart_service",
        ]
        for tool in ("notes_write", "open_door", "office_hours"):
            status, _, text = await stack.call(sre, tool, {"text": "x"})
            assert status == 200, (tool, text)

        other_tenant = _token(stack, "tom", groups=["sre"], tid=SECRET_TENANT)
        no_role = _token(stack, "nat", groups=["sre"], tid="t-1", roles=["Notes.Reader"])
        no_group = _token(stack, "gus", groups=["dev"], tid="t-1")
        elsewhere = _token(stack, "del", groups=["sre"], tid="t-1", department=SECRET_DEPARTMENT)
        bodies += [
            await _refused(stack, elsewhere, "audit_log", {"text": "x"}),  # a claim's value
            await _refused(stack, other_tenant, "restart_service", {"text": "x"}),  # tenant
            await _refused(stack, sre, "restart_service", {"text": "prod"}),  # argument
            await _refused(stack, no_group, "restart_service", {"text": "x"}),  # group
            await _refused(stack, no_role, "notes_write", {"text": "x"}),  # role
            await _refused(stack, sre, "closed_door", {"text": "x"}),  # time
            await _refused(stack, sre, "audit_log", {"text": "x"}),  # run-time error
            await _refused(stack, sre, "audit_log", {"text": "again"}),
        ]
        assert await _listed(stack, other_tenant) == ["office_hours", "open_door"]
        assert await _listed(stack, no_role) == ["office_hours", "open_door", "restart_service"]
        # Outside office hours (the injected clock): hidden and refused.
        monkeypatch.setattr(conditions, "wall_clock", lambda: 1796594400.0)  # Sun 22:00Z
        assert "office_hours" not in await _listed(stack, sre)
        bodies.append(await _refused(stack, sre, "office_hours", {"text": "x"}))

        oncall = _token(stack, "olga", groups=["sre", "oncall"], tid="t-1")
        status, _, text = await stack.call(oncall, "restart_service", {"text": "prod"})
        assert status == 200, text
        # A caller without the rule's scope still gets the step-up first (the ladder runs
        # before conditions): more scopes would help there.
        scopeless = _token(stack, "sam", groups=["sre"], tid="t-1", scope="mcp:access")
        status, headers, _ = await stack.call(scopeless, "restart_service", {"text": "x"})
        assert status == 403 and "insufficient_scope" in headers["WWW-Authenticate"]
        # Nothing refused reached the upstream.
        sent = [r.json["params"]["name"] for r in upstream.calls("tools/call") if r.json]
        assert sent.count("restart_service") == 2 and "closed_door" not in sent
        async with stack.session.get(stack.server.ops_url + "/metrics") as response:
            metrics = await response.text()
        errors = "mcp_gateway_policy_condition_errors_total"
        # Two calls and four listings met the broken condition: each one counted.
        assert _sample(metrics, errors, section="tools", rule="audit_log") == 6.0
        used += [sre, other_tenant, no_role, no_group, oncall, scopeless, elsewhere]


async def test_conditions_on_prompts_and_resources(
    make_stack: MakeStack,
    capsys: pytest.CaptureFixture[str],
) -> None:
    policy = """\
version: 1
baseline_scopes: [mcp:access]
prompts:
  greet:
    scopes: []
    when: ['claims.tid == "t-1"', 'arguments.name != "mallory"']
resources:
  "docs://guide/**": {scopes: [], when: 'claims.tid == "t-1" && !resource.endsWith(".png")'}
"""
    async with make_stack.of(sdk_stack, policy=policy) as (stack, sdk):
        mine = _token(stack, "ann", tid="t-1")
        theirs = _token(stack, "bob", tid=SECRET_TENANT)

        async def names(token: str, method: str, key: str, field: str) -> list[str]:
            status, _, text = await stack.modern(token, method)
            assert status == 200, text
            return sorted(item[field] for item in json.loads(text)["result"][key])

        assert await names(mine, "prompts/list", "prompts", "name") == ["greet"]
        assert await names(theirs, "prompts/list", "prompts", "name") == []
        assert await names(mine, "resources/list", "resources", "uri") == ["docs://guide/intro"]
        assert await names(theirs, "resources/list", "resources", "uri") == []

        status, _, text = await stack.modern(
            mine, "prompts/get", {"name": "greet", "arguments": {"name": "ann"}}, name="greet"
        )
        assert status == 200, text
        status, _, text = await stack.modern(
            mine, "resources/read", {"uri": "docs://guide/intro"}, name="docs://guide/intro"
        )
        assert status == 200, text
        refusals = [
            (mine, "prompts/get", {"name": "greet", "arguments": {"name": "mallory"}}, "greet"),
            (theirs, "prompts/get", {"name": "greet", "arguments": {"name": "bob"}}, "greet"),
            (theirs, "resources/read", {"uri": "docs://guide/intro"}, "docs://guide/**"),
            (mine, "resources/read", {"uri": "docs://guide/logo.png"}, "docs://guide/**"),
        ]
        for token, method, params, rule in refusals:
            name = params.get("name") or params["uri"]
            status, headers, text = await stack.modern(token, method, params, name=name)
            assert status == 403, (method, text)
            assert "WWW-Authenticate" not in headers
            error = json.loads(text)["error"]
            assert error["code"] == -31403 and error["data"] == {"rule": rule}
            assert SECRET_TENANT not in text
        assert sdk.count("prompts/get") == 1 and sdk.count("resources/read") == 1
    logged = capsys.readouterr()
    assert SECRET_TENANT not in logged.out + logged.err


async def test_subscriptions_pass_on_only_what_the_resource_conditions_let_the_caller_read(
    make_stack: MakeStack,
) -> None:
    policy = """\
version: 1
baseline_scopes: [mcp:access]
resources:
  "docs://guide/**": {scopes: [], when: 'claims.tid == "t-1"'}
"""
    guide = "docs://guide/intro"
    async with make_stack.of(sdk_stack, policy=policy) as (stack, _sdk):
        mine = _token(stack, "ann", tid="t-1")
        theirs = _token(stack, "bob", tid=SECRET_TENANT)
        honoured = []
        for token in (mine, theirs):
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            client = Client(streamable_http_client(stack.server.mcp_url, http_client=http))
            async with http, client, client.listen(resource_subscriptions=[guide]) as sub:
                honoured.append(sub.honored.resource_subscriptions)
        # The other tenant's subscription to the guide is not honoured (hidden = absent).
        assert honoured == [[guide], None]
