"""The production wiring (gateway/wiring/production.py) end to end, with real components on
loopback.

The development issuer speaks real OAuth (RFC 7662 introspection with client_secret_basic), the
demo backend is a real MCP server that records every request it receives, and the gateway is
``GatewayServer(config, build_services(config))`` exactly as ``mcp-gateway serve`` runs it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog

from gateway.app import GatewayServer
from gateway.config import Config
from gateway.dev.demo_backend import DemoBackend
from gateway.dev.dev_issuer import DevIssuer
from tests.support.mcp_client import McpTestClient, legacy_initialize_body
from tests.support.serve_process import gateway_config, write_config
from tests.support.wired import wired_gateway

ROOT = Path(__file__).resolve().parents[2]
MODERN = "2026-07-28"
SERVICE_TOKEN = "full-stack-service-token-7f3a"
GATEWAY_SECRET = "full-stack-introspection-secret"
SEAL_KEY = "5f" * 32
CANARY_ROOT = "file:///canary-root-only-the-backend-may-see"


@dataclass
class Stack(McpTestClient):
    issuer: DevIssuer
    backend: DemoBackend
    server: GatewayServer
    config: Config
    audit_file: Path
    session: aiohttp.ClientSession

    def token(self, scopes: str, sub: str = "alice", **kwargs: Any) -> str:
        return self.issuer.mint_token(
            sub=sub, scopes=scopes, audience=self.config.resource, **kwargs
        )

    @property
    def mcp_url(self) -> str:
        return self.server.mcp_url

    async def metrics(self) -> str:
        async with self.session.get(self.server.ops_url + "/metrics") as response:
            return await response.text()


@pytest.fixture
async def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Stack]:
    async with _stack(tmp_path, monkeypatch) as running:
        yield running


@pytest.fixture
async def stack_logging_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    async with _stack(tmp_path, monkeypatch, logging={"log_arguments": True}) as running:
        yield running


@contextlib.asynccontextmanager
async def _stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **extra: Any
) -> AsyncIterator[Stack]:
    issuer = DevIssuer()
    backend = DemoBackend(service_token=SERVICE_TOKEN)
    await issuer.start()
    await backend.start()
    issuer.register_client("mcp-gateway", GATEWAY_SECRET, can_introspect=True)
    monkeypatch.setenv("FULL_STACK_GW_SECRET", GATEWAY_SECRET)
    (tmp_path / "service-token").write_text(SERVICE_TOKEN)
    (tmp_path / "seal-key").write_text(SEAL_KEY)
    audit_file = tmp_path / "audit.log"
    config = gateway_config(
        issuer_url=issuer.url,
        backend_url=backend.url,
        secret={"env": "FULL_STACK_GW_SECRET"},
        credential={"file": "service-token"},
        issuer={"cache": {"max_ttl_s": 60}},
        policy=str(ROOT / "gateway" / "dev" / "demo-policy.yaml"),
        audit={"sink": "file", "path": str(audit_file)},
        input_requests={"seal_keys": [{"id": "k1", "key": {"file": "seal-key"}}]},
        **extra,
    )
    write_config(tmp_path, config)
    try:
        async with wired_gateway(tmp_path / "gateway.yaml") as (server, session):
            yield Stack(issuer, backend, server, server.config, audit_file, session)
    finally:
        await backend.stop()
        await issuer.stop()


async def test_a_reader_lists_only_reader_tools_and_calls_one_through_the_real_backend(
    stack: Stack,
) -> None:
    reader = stack.token("mcp:access notes:read")
    status, _, text = await stack.modern(reader, "tools/list")
    assert status == 200
    names = [tool["name"] for tool in json.loads(text)["result"]["tools"]]
    assert names == [
        "echo",
        "notes_list",
        "notes_report",
        "notes_summarize",
        "time_now",
        "whoami",
        "workspace_roots",
    ]
    status, headers, text = await stack.modern(
        reader, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}
    )
    assert status == 200, text
    assert headers["Cache-Control"] == "no-store"
    result = json.loads(text)["result"]
    assert result["content"] == [{"type": "text", "text": "hi"}]
    assert result["resultType"] == "complete"
    # The backend saw exactly one tool call, carrying the service credential.
    calls = [r for r in stack.backend.received if b'"tools/call"' in r.body]
    assert len(calls) == 1
    assert calls[0].header("Authorization") == f"Bearer {SERVICE_TOKEN}"


@pytest.mark.row("issuer_unavailable")
async def test_an_issuer_outage_is_answered_503_with_retry_after_and_never_reaches_the_backend(
    stack: Stack,
) -> None:
    token = stack.token("mcp:access notes:read")
    stack.issuer.introspection_status = 503
    before = len(stack.backend.received)
    status, headers, text = await stack.modern(
        token, "tools/call", {"name": "echo", "arguments": {"text": "x"}}
    )
    assert status == 503
    assert int(headers["Retry-After"]) >= 1
    assert headers["WWW-Authenticate"].startswith("Bearer ")
    assert 'error="invalid_token"' not in headers["WWW-Authenticate"]
    assert len(stack.backend.received) == before
    assert token not in text


@pytest.mark.row("invalid_token")
@pytest.mark.parametrize("size", [8192, 8193], ids=["an 8 KiB token", "an 8 KiB + 1 token"])
async def test_a_token_at_and_past_the_size_cap_gets_the_gateways_own_401(
    stack: Stack, size: int
) -> None:
    """aiohttp's default header limit would answer a bare 400 before the gateway sees it."""
    status, headers, _ = await stack.modern("A" * size, "tools/list")
    assert status == 401
    assert 'error="invalid_token"' in headers["WWW-Authenticate"]


async def test_the_client_token_never_reaches_logs_metrics_audit_error_bodies_or_the_backend(
    stack: Stack,
) -> None:
    reader = stack.token("mcp:access notes:read")
    writer = stack.token("mcp:access notes:read notes:write", sub="bob")
    unknown = "not-a-real-token-" + "z" * 24
    bodies: list[str] = []
    header_values: list[str] = []
    with structlog.testing.capture_logs() as logs:
        for token, method, params in [
            (reader, "server/discover", None),
            (reader, "tools/list", None),
            (reader, "tools/call", {"name": "echo", "arguments": {"text": "hi"}}),
            (reader, "tools/call", {"name": "notes_add", "arguments": {"text": "no"}}),
            (reader, "tools/call", {"name": "no_such_tool", "arguments": {}}),
            (writer, "tools/call", {"name": "notes_add", "arguments": {"text": "yes"}}),
            (unknown, "tools/list", None),
            # Prompts, resources, completion: allowed, step-up, hidden, absent (issue 24).
            (reader, "prompts/list", None),
            (reader, "prompts/get", {"name": "summarize_notes", "arguments": {"topic": "t"}}),
            (reader, "prompts/get", {"name": "admin_report"}),
            (reader, "prompts/get", {"name": "no_such_prompt"}),
            (reader, "resources/list", None),
            (reader, "resources/read", {"uri": "demo://notes/readme"}),
            (unknown, "resources/read", {"uri": "demo://notes/readme"}),
            (
                reader,
                "completion/complete",
                {
                    "ref": {"type": "ref/prompt", "name": "summarize_notes"},
                    "argument": {"name": "style", "value": "b"},
                },
            ),
        ]:
            status, headers, text = await stack.modern(token, method, params)
            assert status in {200, 400, 401, 403}
            bodies.append(text)
            header_values.extend(headers.values())
        # Legacy era and a token in the query string as well.
        status, headers, text = await stack.post(
            writer,
            legacy_initialize_body("2025-06-18", rid=1),
        )
        bodies.append(text)
        async with stack.session.post(
            stack.server.mcp_url + f"?access_token={reader}", data=b"{}"
        ) as response:
            assert response.status == 400
            bodies.append(await response.text())
            header_values.extend(response.headers.values())
        # An input round (2026-07-28 roots), its retry, and a tampered retry.
        roots = {"roots": {}}
        call = {"name": "workspace_roots", "arguments": {}}
        status, headers, text = await stack.modern(reader, "tools/call", call, capabilities=roots)
        assert status == 200 and '"input_required"' in text, text
        bodies.append(text)
        header_values.extend(headers.values())
        sealed = json.loads(text)["result"]["requestState"]
        answer = {"roots": {"roots": [{"uri": CANARY_ROOT}]}}
        for state in (sealed, sealed[:-2] + "AA"):
            retry = {**call, "requestState": state, "inputResponses": answer}
            status, headers, text = await stack.modern(
                reader, "tools/call", retry, capabilities=roots
            )
            assert status in {200, 400}, text
            bodies.append(text.replace(CANARY_ROOT, "<the tool's own result>"))
            header_values.extend(headers.values())
        stack.issuer.introspection_status = 500
        status, headers, text = await stack.modern(stack.token("mcp:access"), "tools/list")
        assert status == 503
        bodies.append(text)
    metrics = await stack.metrics()
    audit = stack.audit_file.read_text()
    backend_traffic = [
        json.dumps({"headers": dict(r.headers), "body": r.body.decode()})
        for r in stack.backend.received
    ]
    assert any('"notes_add"' in line for line in audit.splitlines())
    for token in (reader, writer, unknown):
        for where, text in [
            ("logs", repr(logs)),
            ("metrics", metrics),
            ("audit", audit),
            ("error bodies", "\n".join(bodies)),
            ("response headers", "\n".join(header_values)),
            ("backend requests", "\n".join(backend_traffic)),
        ]:
            assert token not in text, f"the client token leaked into {where}"
    # What the user answered in an input round is for the backend only, and so is the state.
    assert any(CANARY_ROOT in line for line in backend_traffic)
    for where, text in [
        ("logs", repr(logs)),
        ("metrics", metrics),
        ("audit", audit),
        ("error bodies", "\n".join(bodies)),
    ]:
        assert CANARY_ROOT not in text, f"an input answer leaked into {where}"
    assert all(sealed not in line for line in backend_traffic)


@pytest.mark.row("rate_limited")
async def test_a_tools_rate_limit_answers_429_past_the_limit_and_counts_it_per_tool(
    stack: Stack,
) -> None:
    """gateway/dev/demo-policy.yaml: notes_add allows 30/minute per subject."""
    writer = stack.token("mcp:access notes:write", sub="carol")
    for index in range(30):
        status, _, text = await stack.modern(
            writer, "tools/call", {"name": "notes_add", "arguments": {"text": f"n{index}"}}
        )
        assert status == 200, text
    status, headers, text = await stack.modern(
        writer, "tools/call", {"name": "notes_add", "arguments": {"text": "one too many"}}
    )
    assert status == 429
    assert int(headers["Retry-After"]) >= 1
    assert headers["Cache-Control"] == "no-store"
    # Another subject has its own budget.
    other = stack.token("mcp:access notes:write", sub="dave")
    status, _, _ = await stack.modern(
        other, "tools/call", {"name": "notes_add", "arguments": {"text": "mine"}}
    )
    assert status == 200
    assert 'mcp_gateway_rate_limited_total{scope="tool"} 1.0' in await stack.metrics()


async def test_argument_logging_records_the_shape_of_arguments_never_their_values(
    stack_logging_arguments: Stack,
) -> None:
    stack = stack_logging_arguments
    reader = stack.token("mcp:access notes:read")
    with structlog.testing.capture_logs() as logs:
        status, _, _ = await stack.modern(
            reader, "tools/call", {"name": "echo", "arguments": {"text": "secret-value-42"}}
        )
    assert status == 200
    access = [line for line in logs if line.get("event") == "mcp.request"]
    assert len(access) == 1
    assert access[0]["arguments"] == {"text": "string"}
    assert "secret-value-42" not in repr(logs)
    assert "secret-value-42" not in stack.audit_file.read_text()


async def test_claude_codes_recorded_wire_requests_are_served(stack: Stack) -> None:
    """Claude Code 2.1.328 as recorded in client-behaviour.md §3: lowercase mirrored headers,
    a string probe id, rich clientCapabilities, then tools/list and tools/call."""
    token = stack.token("mcp:access notes:read")
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {
            "name": "claude-code",
            "title": "Claude Code",
            "version": "2.1.328",
            "description": "Anthropic's agentic coding tool",
            "websiteUrl": "https://claude.com/claude-code",
        },
        "io.modelcontextprotocol/clientCapabilities": {
            "roots": {"listChanged": True},
            "elicitation": {"form": {}, "url": {}},
        },
    }
    base = {
        "accept": "application/json, text/event-stream",
        "accept-encoding": "identity",
        "user-agent": "claude-code/2.1.328 (sdk-cli)",
        "mcp-protocol-version": MODERN,
    }
    steps: list[tuple[dict[str, Any], dict[str, str]]] = [
        (
            {
                "id": "server-discover-probe-1",
                "method": "server/discover",
                "params": {"_meta": meta},
            },
            {"mcp-method": "server/discover"},
        ),
        (
            {"id": 0, "method": "tools/list", "params": {"_meta": meta}},
            {"mcp-method": "tools/list"},
        ),
        (
            {
                "id": 1,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "from claude"}, "_meta": meta},
            },
            {"mcp-method": "tools/call", "mcp-name": "echo"},
        ),
    ]
    for message, headers in steps:
        status, response_headers, text = await stack.post(
            token, {"jsonrpc": "2.0", **message}, headers={**base, **headers}
        )
        assert status == 200, text
        assert "Mcp-Session-Id" not in response_headers
        envelope = json.loads(text)
        assert envelope["id"] == message["id"]
        assert envelope["result"]["resultType"] == "complete"
    assert envelope["result"]["content"] == [{"type": "text", "text": "from claude"}]


async def test_codexs_recorded_legacy_session_is_served_without_a_session(stack: Stack) -> None:
    """Codex 0.169.0 (client-behaviour.md §4): initialize 2025-06-18, initialized -> 202, GET and
    DELETE tolerated as 405, progressToken in tools/list and threadId in tools/call _meta."""
    token = stack.token("mcp:access notes:read")
    base = {
        "accept": "text/event-stream, application/json",
        "user-agent": "codex-mcp-client/0.169.0",
    }
    status, headers, text = await stack.post(
        token,
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"elicitation": {"form": {}, "url": {}}},
                "clientInfo": {"name": "codex-mcp-client", "title": "Codex", "version": "0.169.0"},
            },
        },
        headers=base,
    )
    assert status == 200, text
    assert "Mcp-Session-Id" not in headers
    assert json.loads(text)["result"]["protocolVersion"] == "2025-06-18"
    later = {**base, "mcp-protocol-version": "2025-06-18"}
    status, _, text = await stack.post(
        token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=later
    )
    assert (status, text) == (202, "")
    for method in ("GET", "DELETE"):
        async with stack.session.request(
            method, stack.server.mcp_url, headers={"authorization": f"Bearer {token}", **later}
        ) as response:
            assert response.status == 405
            assert response.headers["Allow"] == "POST"
    status, _, text = await stack.post(
        token,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {"_meta": {"progressToken": 0}},
        },
        headers=later,
    )
    assert status == 200, text
    assert {t["name"] for t in json.loads(text)["result"]["tools"]} == {
        "echo",
        "notes_list",
        "notes_report",
        "notes_summarize",
        "time_now",
        "whoami",
        "workspace_roots",
    }
    status, headers, text = await stack.post(
        token,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "echo",
                "arguments": {"text": "from codex"},
                "_meta": {"threadId": "thread-1", "progressToken": 1},
            },
        },
        headers=later,
    )
    assert status == 200, text
    if headers["Content-Type"].startswith("text/event-stream"):
        text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
    result = json.loads(text)["result"]
    assert result["content"] == [{"type": "text", "text": "from codex"}]
    assert "resultType" not in result
