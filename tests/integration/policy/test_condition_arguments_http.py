"""Arguments larger than a rule's ``when:`` conditions may read (issue 43 item 1): 400 / -32602
``condition_arguments_too_large`` naming the rule, at and just past both bounds (values,
characters), in both client eras, before any condition runs and with nothing sent upstream.
An argument no condition reads is not bounded (it goes upstream, not to CEL)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.policy.conditions import MAX_ARGUMENT_CHARACTERS, MAX_ARGUMENT_VALUES
from tests.support.live_stack import MakeStack
from tests.support.upstreams import ModernUpstream, echo_tool

POLICY = """
version: 1
baseline_scopes: [mcp:access]
tools:
  deploy:
    scopes: [tools:echo]
    when: 'arguments.hosts.all(h, h != "prod")'
"""


def _hosts(values: int) -> list[str]:
    """``{"hosts": [...]}`` with ``values`` values: the map, its entry, the list, the items."""
    return ["h"] * (values - 3)


def _long(characters: int) -> list[str]:
    """``{"hosts": [one string]}`` with ``characters`` characters: the key's five, the string."""
    return ["h" * (characters - len("hosts"))]


@pytest.mark.row("condition_arguments_too_large")
async def test_arguments_past_the_bound_are_refused_before_the_conditions_in_both_eras(
    make_stack: MakeStack,
) -> None:
    upstream = ModernUpstream(tools=[echo_tool("deploy")])
    async with make_stack(upstream=upstream, policy=POLICY) as stack:
        token = stack.token()
        for fits, past in (
            (_hosts(MAX_ARGUMENT_VALUES), _hosts(MAX_ARGUMENT_VALUES + 1)),
            (_long(MAX_ARGUMENT_CHARACTERS), _long(MAX_ARGUMENT_CHARACTERS + 1)),
        ):
            # At the bound: the condition runs (and holds).
            status, _, text = await stack.call(token, "deploy", {"hosts": fits}, rid=4)
            assert status == 200, text
            # An argument no condition reads is not counted.
            extra: dict[str, Any] = {"hosts": fits, "content": "x" * 20_000}
            status, _, text = await stack.call(token, "deploy", extra, rid=4)
            assert status == 200, text
            status, headers, text = await stack.call(token, "deploy", {"hosts": past}, rid=9)
            assert status == 400, text
            assert json.loads(text) == {
                "jsonrpc": "2.0",
                "id": 9,
                "error": {
                    "code": -32602,
                    "message": "Arguments too large for the policy conditions of rule 'deploy'",
                    "data": {"rule": "deploy"},
                },
            }
            assert headers["Cache-Control"] == "no-store"
            assert "WWW-Authenticate" not in headers
            # The 2025 profile: the same JSON-RPC error with HTTP 200.
            status, headers, text = await stack.legacy_call(token, "deploy", {"hosts": past})
            assert status == 200, text
            error = json.loads(text)["error"]
            assert (error["code"], error["data"]) == (-32602, {"rule": "deploy"})
            assert "WWW-Authenticate" not in headers
        # Only the calls at the bound went upstream.
        assert len(upstream.calls("tools/call")) == 4
