"""``guardrails:`` in a real ``mcp-gateway serve`` process (one worker and a group of two).

``serve`` builds its services before the event loop runs, unlike the in-process test stacks; a
processor client wired too eagerly fails there at startup, and ``serve`` checks the policy's
guardrail names against the configuration itself. Here the real command starts, shows the
tests' processor (with the file credential) the arguments and the result of a guarded call,
serves the call the processor changed and refuses the one it denied with 403
``guardrail_denied``; an unguarded tool is not shown to it at all.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from gateway.dev.dev_issuer import DevIssuer
from tests.support.guardrail_service import CHECK_PATH, GuardrailService
from tests.support.mcp_client import McpAt
from tests.support.ports import free_port
from tests.support.serve_process import gateway_config, serve_process, write_config
from tests.support.upstreams import ModernUpstream, echo_tool

pytestmark = pytest.mark.slow

RESOURCE = "https://mcp.example.test/mcp"
SECRET = "guard-process-introspection-secret"
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


@pytest.mark.parametrize("workers", [1, 2])
async def test_serve_starts_with_guardrails_and_asks_them(tmp_path: Path, workers: int) -> None:
    upstream = ModernUpstream(accepted={"svc-token"}, tools=[echo_tool("echo"), echo_tool("plain")])
    backend = TestServer(upstream.app(), host="127.0.0.1")
    await backend.start_server()
    guard = GuardrailService(_decide, f"Bearer {GUARD_SECRET}")
    guard_server = TestServer(guard.app(), host="127.0.0.1")
    await guard_server.start_server()
    issuer = DevIssuer(resources=[RESOURCE])
    await issuer.start()
    issuer.register_client("mcp-gateway", SECRET, can_introspect=True)
    token = issuer.mint_token(sub="alice", scopes="mcp:access", audience=RESOURCE)
    port, ops_port = free_port(), free_port()
    (tmp_path / "svc").write_text("svc-token")
    (tmp_path / "guard-token").write_text(GUARD_SECRET + "\n")
    (tmp_path / "policy.yaml").write_text(POLICY)
    config = gateway_config(
        issuer_url=issuer.url,
        backend_url=str(backend.make_url("/mcp")),
        secret={"env": "GUARD_GW_SECRET"},
        credential={"file": "svc"},
        resource=RESOURCE,
        port=port,
        ops_port=ops_port,
        guardrails={
            "pii": {
                "url": str(guard_server.make_url(CHECK_PATH)),
                "allow_insecure_http": True,
                "credential": {"type": "bearer", "token": {"file": "guard-token"}},
            }
        },
    )
    serving = serve_process(
        write_config(tmp_path, config),
        "--workers",
        str(workers),
        *(["--event-loop", "asyncio"] if workers > 1 else []),
        env={"GUARD_GW_SECRET": SECRET},
    )
    try:
        async with serving as gw:
            await gw.until_ready(f"http://127.0.0.1:{ops_port}")
            async with McpAt(f"http://127.0.0.1:{port}/mcp") as client:
                changed = await client.call(token, "echo", {"text": "quiet"})
                refused = await client.call(token, "echo", {"text": "refuse"})
                plain = await client.call(token, "plain", {"text": "x"})
            gw.process.terminate()
            await asyncio.wait_for(gw.process.wait(), 30)
            errors = await gw.errors()
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
    finally:
        await issuer.stop()
        await backend.close()
        await guard_server.close()
    assert "Traceback" not in errors, errors
