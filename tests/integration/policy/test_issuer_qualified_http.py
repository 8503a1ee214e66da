"""Two issuers, one ``alice`` each (issue 43, item 5): a subject is a name its issuer gives.

Two real development issuers behind one gateway (``issuers:``), each minting tokens for a
subject ``alice`` and a client ``ops-console``. Through HTTP: a rule's plain ``subjects`` and
``clients`` entries are the first issuer's names, so the second issuer's ``alice`` and
``ops-console`` do not pass them (the tool is hidden: unknown tool, absent from ``tools/list``);
a qualified entry (``{issuer: <url>, subject: bob}``) admits the second issuer's ``bob`` and no
one else's; and per-subject limits count each issuer's ``alice`` apart.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import structlog

from gateway.dev.dev_issuer import DevIssuer
from tests.support.live_stack import (
    LiveStack,
    ServerFactory,
    issuer_entries,
    live_stack,
    other_issuer,
)
from tests.support.upstreams import ModernUpstream, echo_tool

SCOPES = "mcp:access tools:echo"


@dataclass
class TwoIssuers:
    stack: LiveStack
    other: DevIssuer

    def first(self, sub: str = "alice", client_id: str = "ops-console") -> str:
        """A token of the first issuer (``issuers[0]``)."""
        return self.stack.token(SCOPES, sub=sub, client_id=client_id)

    def second(self, sub: str = "alice", client_id: str = "ops-console") -> str:
        """A token of the second issuer, for the same names."""
        return self.other.mint_token(
            sub=sub, client_id=client_id, scopes=SCOPES, audience=self.stack.config.resource
        )


@contextlib.asynccontextmanager
async def two_issuers(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    policy: str,
    upstream: ModernUpstream | None = None,
    **gateway: Any,
) -> AsyncIterator[TwoIssuers]:
    """``{second}`` in ``policy`` is the second issuer's url."""
    async with other_issuer(monkeypatch) as other:
        first, second = issuer_entries(other)
        async with live_stack(
            tmp_path,
            aiohttp_server,
            monkeypatch,
            policy=policy.replace("{second}", other.url),
            upstream=upstream,
            gateway={"issuer": None, "issuers": [first, second], **gateway},
        ) as stack:
            yield TwoIssuers(stack, other)


@pytest.mark.row("rate_limited")
@pytest.mark.parametrize(
    ("rule", "limits"),
    [("rate_limit: 1/minute", {}), ("description: none", {"principal_rate": "1/minute"})],
    ids=["rule_rate_limit", "limits.principal_rate"],
)
async def test_per_subject_limits_count_each_issuers_alice_apart(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
    rule: str,
    limits: dict[str, str],
) -> None:
    policy = f"""
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {{scopes: [tools:echo], {rule}}}
"""
    async with two_issuers(tmp_path, aiohttp_server, monkeypatch, policy, limits=limits) as two:
        stack = two.stack
        assert (await stack.call(two.first()))[0] == 200
        status, headers, _ = await stack.call(two.first())
        assert status == 429 and int(headers["Retry-After"]) > 0  # the first alice's budget
        status, _, text = await stack.call(two.second())
        assert status == 200, text  # the second issuer's alice has a budget of her own
        assert (await stack.call(two.second()))[0] == 429


QUALIFIED = """
version: 1
baseline_scopes: [mcp:access]
tools:
  mine: {scopes: [tools:echo], subjects: [alice]}
  admin_reset: {scopes: [tools:echo], clients: [ops-console]}
  shared:
    scopes: [tools:echo]
    subjects: [alice, {issuer: "{second}", subject: bob}]
"""


async def listed(stack: LiveStack, token: str) -> list[str]:
    status, _, text = await stack.modern(token, "tools/list")
    assert status == 200, text
    return sorted(tool["name"] for tool in json.loads(text)["result"]["tools"])


async def assert_unknown_tool(stack: LiveStack, token: str, tool: str) -> None:
    status, _, text = await stack.call(token, tool)
    assert status == 400, (tool, text)
    assert json.loads(text)["error"] == {"code": -32602, "message": "Unknown tool"}, tool


async def test_the_second_issuers_alice_and_ops_console_do_not_pass_the_first_issuers_rules(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = ModernUpstream(tools=[echo_tool(n) for n in ("mine", "admin_reset", "shared")])
    with structlog.testing.capture_logs() as logs:
        async with two_issuers(
            tmp_path, aiohttp_server, monkeypatch, QUALIFIED, upstream=upstream
        ) as two:
            await check_qualification(two)
    # Startup said which rules' plain entries apply to the first issuer only.
    warned = [e["detail"] for e in logs if e["event"] == "policy.entry_issuer"]
    assert [w.split(": ")[1] for w in warned] == ["tools.mine", "tools.admin_reset", "tools.shared"]
    assert len(upstream.calls("tools/call")) == 4


async def check_qualification(two: TwoIssuers) -> None:
    stack = two.stack
    # The first issuer's alice, signed in through its ops-console: every rule admits her.
    home = two.first()
    assert await listed(stack, home) == ["admin_reset", "mine", "shared"]
    for tool in ("mine", "admin_reset", "shared"):
        status, _, text = await stack.call(home, tool)
        assert status == 200, (tool, text)
    # The second issuer's alice through its own ops-console: the same names, other people.
    away = two.second()
    assert await listed(stack, away) == []
    for tool in ("mine", "admin_reset", "shared"):
        await assert_unknown_tool(stack, away, tool)
    # A qualified entry admits the second issuer's bob, and not the first issuer's.
    status, _, text = await stack.call(two.second(sub="bob", client_id="cli"), "shared")
    assert status == 200, text
    await assert_unknown_tool(stack, two.first(sub="bob", client_id="cli"), "shared")
