"""Client capabilities go upstream on modern calls; an upstream -32021 comes back as itself.

MCP 2026-07-28 basic/index.mdx §Error codes: ``MissingRequiredClientCapability`` (-32021) with
``data.requiredCapabilities`` and HTTP 400. Real development issuer, real modern upstream
(``fault="missing_capability"``: -32021 unless the call declares ``elicitation``), production
wiring, both client eras.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.backend.upstream.tool_results import CAPABILITY_TEXT
from gateway.protocol.capabilities import MAX_SETTINGS_BYTES
from tests.support.live_stack import MakeStack
from tests.support.schemas import validate_response
from tests.support.upstreams import ModernUpstream

CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"


def forwarded(upstream: ModernUpstream) -> list[Any]:
    return [call.json["params"]["_meta"][CAPS_KEY] for call in upstream.calls("tools/call")]


@pytest.mark.row("missing_client_capability")
async def test_an_upstream_32021_reaches_a_modern_client_as_400_with_known_data_only(
    make_stack: MakeStack,
) -> None:
    upstream = ModernUpstream(fault="missing_capability")
    async with make_stack(upstream=upstream) as stack:
        status, headers, text = await stack.call(stack.token(), arguments={"text": "x"}, rid=41)
    assert status == 400, text
    assert headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "no-store"
    body = json.loads(text)
    validate_response("2026-07-28", body)
    assert body == {
        "jsonrpc": "2.0",
        "id": 41,
        "error": {
            "code": -32021,
            "message": "Missing required client capability: elicitation",
            # Rebuilt from schema-known keys: the upstream's extra key and "debug" are gone.
            "data": {"requiredCapabilities": {"elicitation": {"form": {}}}},
        },
    }
    assert "db-7" not in text and "secret" not in text


async def test_a_modern_clients_known_capabilities_are_forwarded_re_serialised(
    make_stack: MakeStack,
) -> None:
    declared = {
        "elicitation": {"form": {}, "url": {}, "bogus": {"x": 1}},
        "roots": {"listChanged": True},  # 2025 shape: no members in 2026-07-28
        "sampling": {"tools": {}},
        "experimental": {"com.example/big": {"blob": "x" * MAX_SETTINGS_BYTES}},
        "tasks": {"list": {}},  # not a 2026-07-28 client capability
    }
    upstream = ModernUpstream(fault="missing_capability")
    async with make_stack(upstream=upstream) as stack:
        status, _, text = await stack.call(
            stack.token(), arguments={"text": "x"}, capabilities=declared
        )
    assert status == 200, text
    assert json.loads(text)["result"]["isError"] is False
    assert forwarded(upstream) == [
        {
            "elicitation": {"form": {}, "url": {}},
            "roots": {},
            "sampling": {"tools": {}},
            "experimental": {"com.example/big": {}},  # support kept, oversized settings dropped
        }
    ]


async def test_a_legacy_client_gets_the_fixed_tool_error_and_forwards_nothing(
    make_stack: MakeStack,
) -> None:
    # A legacy client declared elicitation in initialize; the stateless gateway answered that
    # itself and cannot know it on tools/call, so it forwards {} and maps -32021 to a tool error.
    upstream = ModernUpstream(fault="missing_capability")
    async with make_stack(upstream=upstream) as stack:
        status, _, text = await stack.legacy_call(stack.token(), arguments={"text": "x"})
    assert status == 200, text
    body = json.loads(text)
    validate_response("2025-06-18", body, "tools/call")
    assert body["result"] == {
        "content": [{"type": "text", "text": CAPABILITY_TEXT}],
        "isError": True,
    }
    assert forwarded(upstream) == [{}]
