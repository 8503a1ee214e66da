"""``guardrails:`` in a real ``mcp-gateway serve`` process (one worker and a group of two).

``serve`` builds its services before the event loop runs, unlike the in-process test stacks; a
processor client wired too eagerly fails there at startup, and ``serve`` checks the policy's
guardrail names against the configuration itself. Here the real command starts, shows the
tests' processor (with the file credential) the arguments and the result of a guarded call,
serves the call the processor changed and refuses the one it denied with 403
``guardrail_denied``; an unguarded tool is not shown to it at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.guardrail_service import CHECK_PATH, GuardrailService
from tests.support.live_stack import ServerFactory
from tests.support.mcp_client import McpAt
from tests.support.serve_process import served_gateway, workers
from tests.support.upstreams import ModernUpstream, echo_tool

pytestmark = pytest.mark.slow

GUARD_SECRET = "guard-process-credential"
POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: [], guardrails: [pii]}
  plain: {scopes: []}
"""


def _decide(message: dict[str, Any]) -> dict[str, Any]:
    if message["phase"] == "response":
        return {"pass": {}}
    text = message["mcpRequest"]["arguments"].get("text", "")
    if text == "refuse":
        return {"error": {"code": "PERMISSION_DENIED", "reason": "not this"}}
    return {"mutated": {"arguments": {"text": text.upper()}}}


@pytest.mark.parametrize("count", [1, 2])
async def test_serve_starts_with_guardrails_and_asks_them(
    tmp_path: Path, aiohttp_server: ServerFactory, count: int
) -> None:
    upstream = ModernUpstream(tools=[echo_tool("echo"), echo_tool("plain")])
    backend = await aiohttp_server(upstream.app())
    guard = GuardrailService(_decide, f"Bearer {GUARD_SECRET}")
    guard_server = await aiohttp_server(guard.app())
    (tmp_path / "guard-token").write_text(GUARD_SECRET + "\n")
    pii = {
        "url": str(guard_server.make_url(CHECK_PATH)),
        "allow_insecure_http": True,
        "credential": {"type": "bearer", "token": {"file": "guard-token"}},
    }
    serving = served_gateway(
        tmp_path,
        str(backend.make_url("/mcp")),
        *workers(count),
        policy=POLICY,
        guardrails={"pii": pii},
    )
    async with serving as served:
        await served.ready()
        token = served.token()
        async with McpAt(served.mcp_url) as client:
            changed = await client.call(token, "echo", {"text": "quiet"})
            refused = await client.call(token, "echo", {"text": "refuse"})
            plain = await client.call(token, "plain", {"text": "x"})
        errors = await served.terminated()
    assert changed[0] == 200 and plain[0] == 200, (changed, plain)
    assert refused[0] == 403 and "WWW-Authenticate" not in refused[1]
    assert json.loads(refused[2])["error"]["data"] == {
        "guardrail": "pii",
        "verdict": "deny",
        "reason": "not this",
    }
    sent = [r.json["params"]["arguments"] for r in upstream.calls("tools/call")]
    assert sent == [{"text": "QUIET"}, {"text": "x"}]
    assert guard.checks() == ["tool_arguments", "tool_result", "tool_arguments"]
    assert {seen.headers["Authorization"] for seen in guard.seen} == {f"Bearer {GUARD_SECRET}"}
    assert "Traceback" not in errors, errors
