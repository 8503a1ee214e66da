"""Both kinds of upstream MCP server driven through the whole gateway by both kinds of client.

Real components only: the development issuer (RFC 7662 over HTTP), the production wiring
(``build_services``), and the recording upstreams of ``tests/support/upstreams.py``: a modern one
(2026-07-28, JSON replies) and a legacy one (2025-06-18, ``Mcp-Session-Id``, SSE replies).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import structlog

from tests.support.live_stack import (
    LEGACY,
    MODERN,
    POLICY,
    LiveStack,
    ServerFactory,
    live_stack,
)
from tests.support.schemas import validate_response
from tests.support.upstreams import LegacyUpstream, ModernUpstream, echo_tool

SERVICE = "service-secret"

Upstream = ModernUpstream | LegacyUpstream


def running_gateway(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    upstream: Upstream,
    *,
    backend_timeout_s: float = 10.0,
    policy: str = POLICY,
) -> contextlib.AbstractAsyncContextManager[LiveStack]:
    gateway = {"backend": {"timeout_s": backend_timeout_s}}
    return live_stack(
        tmp_path, aiohttp_server, monkeypatch, upstream=upstream, policy=policy, gateway=gateway
    )


async def call_echo(
    gw: LiveStack,
    era: str,
    token: str,
    arguments: dict[str, Any],
    *,
    extra: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], str]:
    """``tools/call echo`` the way a client of ``era`` sends it (legacy: after initialize)."""
    if era == "modern":
        return await gw.call(token, "echo", arguments, headers=extra)
    return await gw.legacy_call(token, "echo", arguments, capabilities={}, headers=extra)


def _upstream(kind: str) -> Upstream:
    return ModernUpstream() if kind == "modern" else LegacyUpstream()


@pytest.mark.parametrize("client_era", ["modern", "legacy"])
@pytest.mark.parametrize("upstream_kind", ["modern", "legacy"])
async def test_each_upstream_serves_each_client_era_with_the_service_credential_only(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    upstream_kind: str,
    client_era: str,
) -> None:
    upstream = _upstream(upstream_kind)
    async with running_gateway(tmp_path, aiohttp_server, monkeypatch, upstream) as gw:
        token = gw.token()
        status, headers, text = await call_echo(
            gw,
            client_era,
            token,
            {"text": "hi"},
            extra={"Cookie": "session=client-cookie", "X-Forwarded-User": "mallory"},
        )
        assert status == 200, text
        assert headers["Content-Type"].startswith("application/json")
        envelope = json.loads(text)
        validate_response(MODERN if client_era == "modern" else LEGACY, envelope, "tools/call")
        result = envelope["result"]
        assert result["content"] == [{"type": "text", "text": '{"text": "hi"}'}]
        assert result["structuredContent"] == {"echo": {"text": "hi"}}
        # Keys the upstream owns pass through; its serverInfo does not (the gateway owns it).
        assert result["_meta"]["com.example/trace"] == "kept"
        if client_era == "modern":
            assert result["resultType"] == "complete"
            assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] != "upstream"
        else:
            assert "resultType" not in result
        calls = upstream.calls("tools/call")
        assert len(calls) == 1
        sent = calls[0]
        assert sent.headers["Authorization"] == f"Bearer {SERVICE}"
        for recorded in upstream.requests:
            assert token not in recorded.body.decode()
            assert all(token not in value for value in recorded.headers.values())
            assert "Cookie" not in recorded.headers
            assert "X-Forwarded-User" not in recorded.headers
        assert sent.json["params"]["name"] == "echo"
        assert sent.json["id"] != 5  # a fresh id, never the client's
        if upstream_kind == "legacy":
            assert sent.headers["Mcp-Session-Id"] in upstream.sessions
        else:
            assert sent.headers["Mcp-Name"] == "echo"
            assert sent.json["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == MODERN


async def test_duplicate_name_keys_are_refused_before_anything_reaches_the_upstream(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parser that keeps the first "name" and one that keeps the last would disagree."""
    async with running_gateway(tmp_path, aiohttp_server, monkeypatch, ModernUpstream()) as gw:
        body = (
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",'
            b'"arguments":{},"name":"admin_reset","_meta":{'
            b'"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
            b'"io.modelcontextprotocol/clientCapabilities":{}}}}'
        )
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}
        status, _, text = await gw.post(gw.token(), body, headers)
        assert status == 400
        assert json.loads(text)["error"]["code"] == -32700
        escaped = body.replace(b'"name":"admin_reset"', b'"n\\u0061me":"admin_reset"')
        status, _, text = await gw.post(gw.token(), escaped, headers)
        assert status == 400
        assert json.loads(text)["error"]["code"] == -32700
        assert gw.upstream.calls("tools/call") == []


@pytest.mark.row("tool_error_result")
@pytest.mark.parametrize(
    ("fault", "text"),
    [
        ("slow", "Upstream tool timed out"),
        ("500", "Upstream tool failed"),
        ("oversized", "Upstream reply too large"),
        ("garbled_json", "Upstream tool failed"),
        ("wrong_id", "Upstream tool failed"),
        ("rpc_error", "Upstream tool failed"),
        ("redirect", "Upstream tool failed"),
    ],
    ids=["slow", "HTTP 500", "oversized", "garbled JSON", "wrong id", "JSON-RPC error", "redirect"],
)
async def test_upstream_faults_become_fixed_tool_errors_without_internals(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    text: str,
) -> None:
    upstream = ModernUpstream()
    async with running_gateway(
        tmp_path, aiohttp_server, monkeypatch, upstream, backend_timeout_s=1.0
    ) as gw:
        upstream.fault = fault
        status, headers, body = await call_echo(gw, "modern", gw.token(), {"text": "x"})
        assert status == 200
        assert headers["Cache-Control"] == "no-store"
        result = json.loads(body)["result"]
        assert result["isError"] is True
        assert result["content"] == [{"type": "text", "text": text}]
        for internal in ("Traceback", "hunter2", "/srv/app.py", "not-yours", "9/elsewhere"):
            assert internal not in body


async def test_a_client_disconnect_aborts_the_upstream_call(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = ModernUpstream()
    upstream.fault = "slow"
    async with running_gateway(tmp_path, aiohttp_server, monkeypatch, upstream) as gw:
        call = asyncio.create_task(call_echo(gw, "modern", gw.token(), {"text": "x"}))
        await asyncio.wait_for(upstream.slow_started.wait(), 5)
        call.cancel()  # the client goes away mid-call
        with contextlib.suppress(asyncio.CancelledError):
            await call
        await asyncio.wait_for(upstream.disconnected.wait(), 5)


async def test_progress_from_a_legacy_sse_upstream_reaches_a_modern_client_that_asked(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_gateway(tmp_path, aiohttp_server, monkeypatch, LegacyUpstream()) as gw:
        status, response_headers, text = await gw.call(
            gw.token(), "echo", {"text": "p", "steps": 3}, rid=9, progressToken="client-progress-1"
        )
        assert status == 200
        assert response_headers["Content-Type"].startswith("text/event-stream")
        events = [
            json.loads(line[len("data:") :])
            for line in text.splitlines()
            if line.startswith("data:")
        ]
        progress = [e for e in events if e.get("method") == "notifications/progress"]
        assert progress, text
        assert {p["params"]["progressToken"] for p in progress} == {"client-progress-1"}
        final = events[-1]
        assert final["id"] == 9
        assert final["result"]["content"][0]["type"] == "text"


async def test_rules_without_tools_and_tools_without_rules_are_warned_about_at_startup(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """policy.yaml names only `echo`; the upstream also offers `unruled`, which stays hidden."""
    upstream = ModernUpstream(tools=[echo_tool("echo"), echo_tool("unruled")])
    policy = POLICY + "  ghost_tool: {scopes: [tools:echo]}\n"
    with structlog.testing.capture_logs() as logs:
        async with running_gateway(
            tmp_path, aiohttp_server, monkeypatch, upstream, policy=policy
        ) as gw:
            for _ in range(40):
                events = {line["event"] for line in logs}
                if {"policy.rule_matches_no_tool", "policy.tool_without_rule_hidden"} <= events:
                    break
                await asyncio.sleep(0.05)
            status, _, text = await gw.post(
                gw.token(),
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/list",
                    "params": {
                        "_meta": {
                            "io.modelcontextprotocol/protocolVersion": MODERN,
                            "io.modelcontextprotocol/clientCapabilities": {},
                        }
                    },
                },
                {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"},
            )
    assert status == 200
    assert [tool["name"] for tool in json.loads(text)["result"]["tools"]] == ["echo"]
    unmatched = [line for line in logs if line["event"] == "policy.rule_matches_no_tool"]
    hidden = [line for line in logs if line["event"] == "policy.tool_without_rule_hidden"]
    assert len(unmatched) == 1 and "ghost_tool" in unmatched[0]["detail"]
    assert [line["tool"] for line in hidden] == ["unruled"]
