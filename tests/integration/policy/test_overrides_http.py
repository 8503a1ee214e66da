"""Policy ``override:`` through the real HTTP surface.

A real upstream MCP server on loopback records every request it receives; the production
gateway (wired as ``serve`` wires it) fronts it with a policy that retitles a tool, renames
another and fixes and hides its arguments. Checked on both client eras (2026-07-28 and the 2025
profile): what ``tools/list`` shows, what the upstream receives, the refusal of a caller that
sets a fixed or hidden argument (status, JSON-RPC code, headers, nothing upstream), a policy
hot reload that changes the override, a misfit override (tool hidden, logged, ``/readyz``),
the audit trail and metrics naming the exposed tool, and that the client's token reaches
neither the upstream nor any log.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.federation import federated_stack, scopes
from tests.support.live_stack import (
    LEGACY,
    LiveStack,
    MakeStack,
)
from tests.support.mcp_client import legacy_initialize_body
from tests.support.printed import Printed
from tests.support.upstreams import LegacyUpstream, ModernUpstream, echo_tool

POLICY = """
version: 1
baseline_scopes: [mcp:access]
tools:
  echo:
    scopes: [tools:echo]
    description: reviewed by the platform team (a note for people, never shown)
    override:
      title: Echo (reviewed)
      description: Repeats the text back.
      annotations: {readOnlyHint: false, destructiveHint: true}
  search:
    scopes: [tools:echo]
    rate_limit: 100/minute
    override:
      rename: find
      arguments:
        fixed: {tenant: acme}
        hidden: [debug]
"""


def search_tool() -> dict[str, Any]:
    return {
        "name": "search",
        "title": "Search",
        "description": "Backend search",
        "annotations": {"readOnlyHint": True},
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "tenant": {"type": "string", "x-mcp-header": "Tenant"},
                "debug": {"type": "boolean"},
            },
            "required": ["query", "tenant"],
            "additionalProperties": False,
        },
    }


def upstream_tools() -> list[dict[str, Any]]:
    echo = echo_tool("echo")
    echo["annotations"] = {"readOnlyHint": True, "openWorldHint": False}
    return [echo, search_tool()]


async def legacy(stack: LiveStack, token: str, method: str, params: dict[str, Any]) -> Any:
    """``initialize`` + ``notifications/initialized`` + one request, as a 2025 client."""
    init = legacy_initialize_body(LEGACY)
    assert (await stack.post(token, init))[0] == 200
    headers = {"MCP-Protocol-Version": LEGACY}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await stack.post(token, note, headers))[0] == 202
    body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
    return await stack.post(token, body, headers)


def listed(text: str) -> dict[str, Any]:
    return {t["name"]: t for t in json.loads(text)["result"]["tools"]}


def upstream_calls(upstream: Any) -> list[dict[str, Any]]:
    return [r.json["params"] for r in upstream.calls("tools/call")]


def check_listing(tools: dict[str, Any]) -> None:
    assert sorted(tools) == ["echo", "find"]
    echo, find = tools["echo"], tools["find"]
    assert echo["title"] == "Echo (reviewed)"
    assert echo["description"] == "Repeats the text back."
    assert echo["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "openWorldHint": False,
    }
    schema = find["inputSchema"]
    assert sorted(schema["properties"]) == ["query"]
    assert schema["required"] == ["query"]
    assert find["title"] == "Search" and find["description"] == "Backend search"


async def test_overrides_reach_listing_and_calls_in_both_eras(
    tmp_path: Path, make_stack: MakeStack, leaks: Printed
) -> None:
    upstream = ModernUpstream(tools=upstream_tools())
    audit = tmp_path / "audit.jsonl"
    async with make_stack(
        upstream=upstream,
        policy=POLICY,
        gateway={"audit": {"sink": "file", "path": str(audit)}},
    ) as stack:
        token = stack.token()
        # --- listing, 2026-07-28 and 2025 ---
        status, _, text = await stack.modern(token, "tools/list")
        assert status == 200, text
        check_listing(listed(text))
        assert "never shown" not in text
        status, _, text = await legacy(stack, token, "tools/list", {})
        assert status == 200, text
        check_listing(listed(text))

        # --- calls: the upstream gets its own name and the fixed argument ---
        status, _, text = await stack.call(token, "find", {"query": "q"})
        assert status == 200, text
        assert json.loads(text)["result"]["structuredContent"] == {
            "echo": {"query": "q", "tenant": "acme"}
        }
        status, _, text = await legacy(
            stack, token, "tools/call", {"name": "find", "arguments": {"query": "old"}}
        )
        assert status == 200 and "error" not in json.loads(text), text
        sent = upstream_calls(upstream)
        assert [(p["name"], p["arguments"]) for p in sent] == [
            ("search", {"query": "q", "tenant": "acme"}),
            ("search", {"query": "old", "tenant": "acme"}),
        ]
        modern_call = upstream.calls("tools/call")[0]
        # The backend's own x-mcp-header parameter, derived from the injected value.
        assert modern_call.headers.get("Mcp-Param-Tenant") == "acme"
        assert modern_call.headers.get("Mcp-Name") == "search"

        # --- the backend's name is not exposed any more ---
        status, _, text = await stack.call(token, "search", {"query": "q", "tenant": "x"})
        assert status == 400 and json.loads(text)["error"]["code"] == -32602
        assert json.loads(text)["error"]["message"] == "Unknown tool"
        assert len(upstream.calls("tools/call")) == 2
        async with stack.session.get(stack.server.ops_url + "/metrics") as response:
            metrics = await response.text()
    assert 'tool="find"' in metrics and 'tool="search"' not in metrics
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    called = [r for r in records if r.get("event") == "tool_call" and r.get("outcome") == "ok"]
    assert [r["tool"] for r in called] == ["find", "find"], called
    # SECURITY: the client's token reaches neither the upstream nor any log, audit or metric.
    haystacks = {
        "upstream": repr([(dict(r.headers), r.body) for r in upstream.requests]),
        "structlog": repr(leaks.events),
        "stdout/stderr": leaks.written(),
        "stdlib logs": leaks.logged(),
        "audit": audit.read_text(),
        "metrics": metrics,
    }
    assert leaks.events
    for where, text in haystacks.items():
        assert token not in text, f"token leaked into {where}"


@pytest.mark.row("argument_not_settable")
async def test_a_caller_cannot_set_a_fixed_or_hidden_argument(make_stack: MakeStack) -> None:
    upstream = ModernUpstream(tools=upstream_tools())
    async with make_stack(upstream=upstream, policy=POLICY) as stack:
        token = stack.token()
        cases = [
            ({"query": "q", "tenant": "globex"}, ["tenant"]),
            ({"query": "q", "debug": True}, ["debug"]),
            ({"query": "q", "tenant": "acme", "debug": False}, ["debug", "tenant"]),
        ]
        for arguments, names in cases:
            # The modern client mirrors the fixed argument's header too: still refused by us.
            headers = {"Mcp-Param-Tenant": "globex"} if "tenant" in arguments else None
            status, got, text = await stack.call(token, "find", arguments, rid=7, headers=headers)
            assert status == 400, text
            body = json.loads(text)
            assert body == {
                "jsonrpc": "2.0",
                "id": 7,
                "error": {
                    "code": -32602,
                    "message": "Arguments set by the gateway cannot be set by the caller: "
                    + ", ".join(names),
                    "data": {"arguments": names},
                },
            }
            assert got["Content-Type"].startswith("application/json")
            assert got["Cache-Control"] == "no-store"
            assert "WWW-Authenticate" not in got, got
            assert got["X-Request-ID"]
        # The legacy profile: the same error with HTTP 200 (its rule for JSON-RPC errors).
        status, got, text = await legacy(
            stack,
            token,
            "tools/call",
            {"name": "find", "arguments": {"query": "q", "tenant": "globex"}},
        )
        assert status == 200, text
        assert json.loads(text)["error"]["code"] == -32602
        assert json.loads(text)["error"]["data"] == {"arguments": ["tenant"]}
        assert got["Cache-Control"] == "no-store"
        # A caller without the tool's scope is told about the scope first (403, not 400).
        status, _, _ = await stack.call(stack.token("mcp:access"), "find", {"tenant": "x"})
        assert status == 403
    assert upstream.calls("tools/call") == []  # nothing went upstream


async def test_a_policy_reload_changes_the_override_without_restart(
    tmp_path: Path, make_stack: MakeStack
) -> None:
    upstream = ModernUpstream(tools=upstream_tools())
    async with make_stack(upstream=upstream, policy=POLICY) as stack:
        token = stack.token()
        assert (await stack.call(token, "find", {"query": "a"}))[0] == 200
        changed = POLICY.replace("rename: find", "rename: lookup").replace("acme", "globex")
        changed = changed.replace("title: Echo (reviewed)", "title: Echo v2")
        (tmp_path / "policy.yaml").write_text(changed)
        assert stack.server.services.reload_policy() is True  # what SIGHUP does
        status, _, text = await stack.modern(token, "tools/list")
        tools = listed(text)
        assert sorted(tools) == ["echo", "lookup"] and tools["echo"]["title"] == "Echo v2"
        assert (await stack.call(token, "find", {"query": "b"}))[0] == 400  # unknown now
        status, _, text = await stack.call(token, "lookup", {"query": "c"})
        assert status == 200, text
        # The override removed: the backend's own definition and name again.
        (tmp_path / "policy.yaml").write_text(
            POLICY.split("  search:", maxsplit=1)[0] + "  search: {scopes: [tools:echo]}\n"
        )
        assert stack.server.services.reload_policy() is True
        status, _, text = await stack.modern(token, "tools/list")
        search = listed(text)["search"]
        assert search["inputSchema"] == search_tool()["inputSchema"]
        status, _, text = await stack.call(
            token,
            "search",
            {"query": "d", "tenant": "initech"},
            headers={"Mcp-Param-Tenant": "initech"},
        )
        assert status == 200, text
    assert [(p["name"], p["arguments"]) for p in upstream_calls(upstream)] == [
        ("search", {"query": "a", "tenant": "acme"}),
        ("search", {"query": "c", "tenant": "globex"}),
        ("search", {"query": "d", "tenant": "initech"}),
    ]


MISFIT = """
version: 1
baseline_scopes: [mcp:access]
tools:
  echo:
    scopes: [tools:echo]
    override: {arguments: {fixed: {tenant: acme}}}
  search:
    scopes: [tools:echo]
    override: {arguments: {hidden: [query]}}
  other: {scopes: [tools:echo], override: {arguments: {fixed: {steps: "three"}}}}
  fine: {scopes: [tools:echo]}
"""


async def test_an_override_that_does_not_fit_hides_the_tool_and_says_why(
    make_stack: MakeStack,
    log_events: list[MutableMapping[str, Any]],
) -> None:
    upstream = ModernUpstream(tools=[*upstream_tools(), echo_tool("other"), echo_tool("fine")])
    async with make_stack(upstream=upstream, policy=MISFIT) as stack:
        token = stack.token()
        status, _, text = await stack.modern(token, "tools/list")
        assert sorted(listed(text)) == ["fine"]  # fail closed: never served un-pinned
        status, _, text = await stack.call(token, "echo", {"text": "x"})
        assert status == 400 and json.loads(text)["error"]["message"] == "Unknown tool"
        async with stack.session.get(stack.server.ops_url + "/readyz") as response:
            body = await response.json()
    refused = sorted(
        (e["tool"], e["reason"]) for e in log_events if e["event"] == "tool_override_refused"
    )
    assert refused == [
        ("echo", "fixed argument 'tenant' is not a property of the inputSchema"),
        ("other", "fixed argument 'steps': the value does not match its schema"),
        ("search", "hidden argument 'query' is required: fix it instead"),
    ]
    positions = sorted(
        e["override"].rsplit("policy.yaml:", 1)[1]
        for e in log_events
        if e["event"] == "tool_override_refused"
    )
    assert positions == ["10:5", "11:33", "7:5"]  # file:line:col of each override
    assert body["backends"]["default"]["override_refused"] == 3
    assert upstream.calls("tools/call") == []


async def test_rename_and_fixed_arguments_toward_a_legacy_upstream(make_stack: MakeStack) -> None:
    upstream = LegacyUpstream(tools=upstream_tools())
    async with make_stack(upstream=upstream, policy=POLICY) as stack:
        status, _, text = await stack.call(stack.token(), "find", {"query": "q"})
        assert status == 200, text
    assert [(p["name"], p["arguments"]) for p in upstream_calls(upstream)] == [
        ("search", {"query": "q", "tenant": "acme"})
    ]


FEDERATED = """
version: 1
baseline_scopes: [mcp:access]
tools:
  "docs__*": {scopes: [docs:read]}
  "tickets__*": {scopes: [tickets:write]}
  docs__search: {scopes: [docs:read], override: {rename: find, arguments: {fixed: {steps: 3}}}}
  docs__echo: {scopes: [docs:read], override: {rename: tickets__echo2}}
  tickets__create: {scopes: [tickets:write], override: {rename: tickets__open}}
"""


async def test_renames_across_several_backends(
    make_stack: MakeStack,
    log_events: list[MutableMapping[str, Any]],
) -> None:
    """A rename is verbatim (no prefix added) and routes to its own backend; a rename into
    another backend's prefix is ambiguous and hidden (logged), like any name there."""
    async with make_stack.of(federated_stack, policy=FEDERATED) as fed:
        assert await fed.listed() == ["find", "tickets__echo", "tickets__open"]
        token = fed.token()
        status, _, body = await fed.modern_call(token, "find", {"text": "a"})
        assert status == 200, body
        status, _, body = await fed.modern_call(token, "tickets__open", {"text": "b"})
        assert status == 200, body
        # A renamed name is governed by the rule that renamed it (docs:read, not tickets).
        status, _, _ = await fed.modern_call(fed.token(scopes("tickets:write")), "find")
        assert status == 403
    assert [(p["name"], p["arguments"]) for p in upstream_calls(fed.docs)] == [
        ("search", {"text": "a", "steps": 3})
    ]
    assert [(p["name"], p["arguments"]) for p in upstream_calls(fed.tickets)] == [
        ("create", {"text": "b"})
    ]
    collisions = [e for e in log_events if e["event"] == "backend_tool_collision"]
    assert [(e["tool"], e["backends"], e["reason"]) for e in collisions] == [
        ("tickets__echo2", ["docs", "tickets"], "prefix")
    ]


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_the_official_sdk_sees_and_calls_the_exposed_tool(
    make_stack: MakeStack, mode: str
) -> None:
    """An independent client (the ``mcp`` SDK) parses the overridden listing and calls the
    renamed tool; the upstream gets its own name and the fixed argument."""
    upstream = ModernUpstream(tools=upstream_tools())
    async with make_stack(upstream=upstream, policy=POLICY) as stack:
        headers = {"Authorization": f"Bearer {stack.token()}"}
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(stack.server.mcp_url, http_client=http)
            async with Client(transport, mode=mode) as client:
                tools = {tool.name: tool for tool in (await client.list_tools()).tools}
                assert sorted(tools) == ["echo", "find"]
                assert tools["echo"].title == "Echo (reviewed)"
                assert tools["echo"].annotations is not None
                assert tools["echo"].annotations.read_only_hint is False
                assert tools["echo"].annotations.destructive_hint is True
                assert sorted(tools["find"].input_schema["properties"]) == ["query"]
                result = await client.call_tool("find", {"query": "sdk"})
                assert result.is_error is False
    assert [(p["name"], p["arguments"]) for p in upstream_calls(upstream)] == [
        ("search", {"query": "sdk", "tenant": "acme"})
    ]


async def test_in_a_2025_03_26_batch_only_the_member_that_sets_a_fixed_argument_is_refused(
    make_stack: MakeStack,
) -> None:
    upstream = ModernUpstream(tools=upstream_tools())
    async with make_stack(upstream=upstream, policy=POLICY) as stack:
        token = stack.token()
        init = legacy_initialize_body("2025-03-26")
        assert (await stack.post(token, init))[0] == 200
        batch = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "find", "arguments": {"query": "ok"}},
            },
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "find", "arguments": {"query": "no", "tenant": "globex"}},
            },
        ]
        status, _, text = await stack.post(
            token, json.dumps(batch).encode(), {"MCP-Protocol-Version": "2025-03-26"}
        )
        assert status == 200, text
        entries = {entry["id"]: entry for entry in json.loads(text)}
        assert "result" in entries[1]
        # A batch member's JSON-RPC error carries the row's fixed message (no data).
        assert entries[2]["error"] == {
            "code": -32602,
            "message": "Arguments set by the gateway cannot be set by the caller",
        }
    assert [p["arguments"] for p in upstream_calls(upstream)] == [{"query": "ok", "tenant": "acme"}]


async def test_the_renaming_rules_limits_apply_under_the_new_name(make_stack: MakeStack) -> None:
    upstream = ModernUpstream(tools=upstream_tools())
    policy = POLICY.replace("rate_limit: 100/minute", "rate_limit: 1/minute")
    async with make_stack(upstream=upstream, policy=policy) as stack:
        token = stack.token()
        assert (await stack.call(token, "find", {"query": "1"}))[0] == 200
        status, headers, text = await stack.call(token, "find", {"query": "2"})
        assert status == 429, text
        assert json.loads(text)["error"]["code"] == -31429 and "Retry-After" in headers
        # Another caller has its own budget (per subject, keyed by the exposed name).
        assert (await stack.call(stack.token(sub="frank"), "find", {"query": "3"}))[0] == 200
    assert len(upstream.calls("tools/call")) == 2


async def test_when_conditions_see_the_arguments_the_backend_gets(
    tmp_path: Path, make_stack: MakeStack
) -> None:
    """A ``when:`` condition on the renaming rule reads the fixed value (the caller cannot set
    it, so a condition on it cannot be steered by the caller)."""
    upstream = ModernUpstream(tools=upstream_tools())
    policy = POLICY.replace(
        "    rate_limit: 100/minute\n",
        '    when: \'arguments.tenant == "acme" && tool == "find"\'\n',
    )
    async with make_stack(upstream=upstream, policy=policy) as stack:
        token = stack.token()
        assert (await stack.call(token, "find", {"query": "1"}))[0] == 200
        (tmp_path / "policy.yaml").write_text(policy.replace("tenant: acme", "tenant: globex"))
        assert stack.server.services.reload_policy() is True
        status, _, text = await stack.call(token, "find", {"query": "2"})
        assert status == 403, text
        assert json.loads(text)["error"]["data"] == {"rule": "search"}
    assert len(upstream.calls("tools/call")) == 1
