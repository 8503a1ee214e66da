"""``scope_hierarchy:`` through the whole stack (issue 25): the dev issuer's real tokens
(introspection), the real gateway and a real upstream on loopback.

A granted scope satisfies the scopes it implies, transitively (MCP 2026-07-28 authorization:
servers MUST account for scope hierarchies); a 403 still names the least-privilege scope the
rule needs, never the wider one that would imply it; the audit trail names the caller's own
scope the decision rested on.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.jwt_stack import parse_challenge
from tests.support.live_stack import MakeStack
from tests.support.upstreams import ModernUpstream, echo_tool

POLICY = """\
version: 1
baseline_scopes: [mcp:access]
scope_hierarchy:
  admin: [tickets:write, docs:read]
  tickets:write: [tickets:read]
tools:
  read_ticket: {scopes: [tickets:read]}
  create_ticket: {scopes: [tickets:write]}
  search_docs: {scopes: [docs:read]}
  reset: {scopes: [admin]}
"""


def _upstream() -> ModernUpstream:
    names = ("read_ticket", "create_ticket", "search_docs", "reset")
    return ModernUpstream(tools=[echo_tool(name) for name in names])


async def test_an_implied_scope_admits_and_a_403_names_the_least_privilege_scope(
    tmp_path: Path, make_stack: MakeStack
) -> None:
    audit = tmp_path / "audit.jsonl"
    async with make_stack(
        upstream=_upstream(),
        policy=POLICY,
        gateway={"audit": {"sink": "file", "path": str(audit)}},
    ) as stack:
        writer = stack.token("mcp:access tickets:write", sub="wendy")
        # tickets:write implies tickets:read: the read is admitted without tickets:read.
        status, _, text = await stack.call(writer, "read_ticket", {"text": "t-1"})
        assert status == 200 and '"isError":false' in text.replace(" ", ""), text
        status, _, text = await stack.call(writer, "create_ticket", {"text": "t-2"})
        assert status == 200, text
        # ... and tools/list shows what the hierarchy admits, nothing more.
        status, _, text = await stack.modern(writer, "tools/list")
        assert status == 200, text
        listed = sorted(tool["name"] for tool in json.loads(text)["result"]["tools"])
        assert listed == ["create_ticket", "read_ticket"]

        # Transitively: admin -> tickets:write -> tickets:read.
        admin = stack.token("mcp:access admin", sub="ada")
        for tool in ("read_ticket", "create_ticket", "search_docs", "reset"):
            status, _, text = await stack.call(admin, tool, {"text": "x"})
            assert status == 200, (tool, text)

        # A hierarchy only widens downwards: tickets:read implies nothing.
        reader = stack.token("mcp:access tickets:read", sub="rita")
        status, headers, text = await stack.call(reader, "create_ticket", {"text": "n"})
        assert status == 403, text
        challenge = parse_challenge(headers["WWW-Authenticate"])
        assert challenge["error"] == "insufficient_scope"
        # The least-privilege scope (tickets:write), never admin, which would also imply it.
        assert challenge["scope"] == "mcp:access tickets:write"
        error = json.loads(text)["error"]
        assert error["data"] == {
            "required_scopes": ["mcp:access", "tickets:write"],
            "missing_scopes": ["tickets:write"],
        }

        # A caller with nothing but the baseline is asked for tickets:read, not a wider scope.
        basic = stack.token("mcp:access", sub="bob")
        status, headers, text = await stack.call(basic, "read_ticket", {"text": "t"})
        assert status == 403, text
        assert parse_challenge(headers["WWW-Authenticate"])["scope"] == "mcp:access tickets:read"
        assert json.loads(text)["error"]["data"]["missing_scopes"] == ["tickets:read"]

    # The audit trail names the caller's own scopes the allow rested on (tickets:write for a
    # rule needing tickets:read; admin for docs:read).
    events = [json.loads(line) for line in audit.read_text().splitlines()]
    used = {
        (e["subject"], e["tool"]): e["granted_scopes"]
        for e in events
        if e.get("decision") == "allow" and e.get("tool")
    }
    assert used[("wendy", "read_ticket")] == ["mcp:access", "tickets:write"]
    assert used[("ada", "search_docs")] == ["mcp:access", "admin"]
