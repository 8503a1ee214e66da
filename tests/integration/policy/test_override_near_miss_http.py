"""A fixed argument cannot be reached through a near-miss spelling (issue 43, item 11).

The backend's schema admits extra properties, so whatever keys a caller sends are forwarded
beside the pinned one; a backend that folds keys (Go's ``encoding/json``, a case-insensitive
binder) would read ``Env`` as the ``env`` the policy fixes. Through the real HTTP surface, both
client eras: a key equal to a fixed one after Unicode compatibility case folding and trimming
is refused like the fixed name itself (400 / -32602 ``argument_not_settable``, ``data.arguments``
naming the policy's name, never the caller's key), and nothing goes upstream.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.live_stack import MakeStack
from tests.support.upstreams import ModernUpstream, echo_tool

POLICY = """
version: 1
baseline_scopes: [mcp:access]
tools:
  deploy:
    scopes: [tools:echo]
    override: {arguments: {fixed: {env: staging}}}
"""

NEAR_MISSES = [
    "Env",  # case
    "ENV",
    "env ",  # trailing space
    "\tenv",
    "\uff45\uff4e\uff56",  # fullwidth: NFKC makes it "env"
    "eNv",
    "\u0435nv",  # Cyrillic small ie: another script's letter that looks like "e"
    "\u0435\u043d\u0432",  # all Cyrillic, same length
    "e\u200bnv",  # a zero-width space inside
    "en\u0306v",  # a combining mark on the n
    "\u03b5nv",  # Greek epsilon
]


def deploy_tool() -> dict[str, Any]:
    tool = echo_tool("deploy")
    tool["inputSchema"]["properties"]["env"] = {"type": "string"}
    return tool  # no additionalProperties: false, so extra keys reach the backend


@pytest.mark.row("argument_not_settable")
async def test_near_miss_keys_of_a_fixed_argument_are_refused_in_both_eras(
    make_stack: MakeStack,
) -> None:
    upstream = ModernUpstream(tools=[deploy_tool()])
    async with make_stack(upstream=upstream, policy=POLICY) as stack:
        token = stack.token()
        for key in NEAR_MISSES:
            status, headers, text = await stack.call(
                token, "deploy", {"text": "go", key: "prod"}, rid=9
            )
            assert status == 400, (key, text)
            assert json.loads(text) == {
                "jsonrpc": "2.0",
                "id": 9,
                "error": {
                    "code": -32602,
                    "message": "Arguments set by the gateway cannot be set by the caller: env",
                    "data": {"arguments": ["env"]},
                },
            }, key
            assert headers["Cache-Control"] == "no-store"
            assert "WWW-Authenticate" not in headers
            # The 2025 profile: the same JSON-RPC error with HTTP 200.
            status, headers, text = await stack.legacy_call(
                token, "deploy", {"text": "go", key: "prod"}
            )
            assert status == 200, (key, text)
            error = json.loads(text)["error"]
            assert (error["code"], error["data"]) == (-32602, {"arguments": ["env"]}), key
        assert upstream.calls("tools/call") == []  # nothing went upstream
        # A key that is not a spelling of the fixed one still passes, beside the pinned value.
        status, _, text = await stack.call(token, "deploy", {"text": "go", "envelope": "x"})
        assert status == 200, text
    assert [r.json["params"]["arguments"] for r in upstream.calls("tools/call")] == [
        {"text": "go", "envelope": "x", "env": "staging"}
    ]
