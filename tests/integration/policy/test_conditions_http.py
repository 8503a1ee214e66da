"""``when:`` conditions (CEL) through the whole stack (issue 25): the dev issuer's signed tokens
carrying ``groups`` and ``tid`` (introspected), the real gateway and a real upstream on loopback.

A condition refusal is 403 ``condition_denied`` naming the rule, never a claim value, and with
no ``WWW-Authenticate`` challenge: more scopes would not help, so no step-up loop. A condition
that cannot be evaluated denies the same way (never 500, never allow) and is logged once.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.live_stack import LiveStack, ServerFactory, live_stack
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
"""


def _token(stack: LiveStack, sub: str, **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": stack.issuer.url, "sub": sub, "aud": stack.config.resource, "iat": now,
        "exp": now + 300, "client_id": "demo-cli", "scope": "mcp:access ops", **claims,
    }  # fmt: skip
    return stack.issuer.mint_signed(body, header={"typ": "at+jwt"})


@pytest.mark.row("condition_denied")
async def test_conditions_allow_by_group_and_deny_by_tenant_argument_and_error(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    upstream = ModernUpstream(tools=[echo_tool("restart_service"), echo_tool("audit_log")])
    async with live_stack(
        tmp_path, aiohttp_server, monkeypatch, upstream=upstream, policy=POLICY
    ) as stack:
        sre = _token(stack, "sam", groups=["sre"], tid="t-1")
        status, _, text = await stack.call(sre, "restart_service", {"text": "staging"})
        assert status == 200 and '"isError":false' in text.replace(" ", ""), text
        # Tools with conditions stay listed; the call decides (docs/policy.md#conditions).
        status, _, text = await stack.modern(sre, "tools/list")
        listed = sorted(tool["name"] for tool in json.loads(text)["result"]["tools"])
        assert listed == ["audit_log", "restart_service"]

        refusals = [
            # Another tenant.
            (_token(stack, "tom", groups=["sre"], tid="t-2-secret"), "restart_service", "x"),
            # The right tenant and group, but a prod restart without the on-call group.
            (_token(stack, "sam", groups=["sre"], tid="t-1"), "restart_service", "prod"),
            # No department claim: an evaluation error (no has()), which denies.
            (sre, "audit_log", "x"),
            (sre, "audit_log", "again"),
        ]
        for token, tool, value in refusals:
            status, headers, text = await stack.call(token, tool, {"text": value})
            assert status == 403, text
            assert "WWW-Authenticate" not in headers  # no step-up: scopes would not help
            error = json.loads(text)["error"]
            assert error["code"] == -31403
            assert error["message"] == f"Denied by a policy condition of rule '{tool}'"
            assert error["data"] == {"rule": tool}
            assert "t-2-secret" not in text and "sre" not in text  # never the claim values

        oncall = _token(stack, "olga", groups=["sre", "oncall"], tid="t-1")
        status, _, text = await stack.call(oncall, "restart_service", {"text": "prod"})
        assert status == 200, text
        # Nothing refused reached the upstream.
        sent = [
            r.json["params"]["arguments"]["text"] for r in upstream.calls("tools/call") if r.json
        ]
        assert sent == ["staging", "prod"]
    logged = capsys.readouterr()
    lines = [line for line in (logged.out + logged.err).splitlines() if "condition_error" in line]
    assert len(lines) == 1, lines  # once per rule, with the reason
    assert "audit_log" in lines[0] and "department" in lines[0]
