"""The exchange with a guardrail processor (gateway/guardrails/exchange.py): the message is the
ExtMCP message set as JSON, the verdict is read strictly, a reason is cleaned for the client."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from gateway.guardrails.exchange import MAX_REASON_CHARS, Verdict, message, read_verdict
from gateway.seams import GuardedContent, Principal, ToolDef, frozen_claims

WHO = Principal(
    subject="erin",
    client_id="cli",
    scopes=frozenset({"mcp:access"}),
    expires_at=math.inf,
    issuer="https://id.example",
    fingerprint="-",
    claims=frozen_claims({"tid": "t-1", "org": {"unit": "r&d"}, "email": "erin@example"}),
)
TOOL = ToolDef("echo", {"name": "echo", "inputSchema": {"type": "object"}}, backend="docs")
ARGUMENTS = GuardedContent(
    check="tool_arguments",
    method="tools/call",
    target="echo",
    backend="docs",
    content={"text": "hi"},
    policy_version="v1",
    rule="echo",
    tool=TOOL,
)
RESULT = GuardedContent(
    check="resource_result",
    method="resources/read",
    target="file:///a",
    backend="docs",
    content={"contents": []},
    policy_version="v1",
    rule="file:///**",
)


def _verdict(body: Any, content: GuardedContent = ARGUMENTS, **kw: Any) -> Verdict | None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return read_verdict(kw.get("status", 200), kw.get("ctype", "application/json"), raw, content)


def test_the_request_message_has_the_extmcp_members_and_only_the_listed_claims() -> None:
    sent = json.loads(message(ARGUMENTS, WHO, claims=("tid", "org.unit", "gone"), request_id="r"))
    pin = sent["metadataContext"].pop("catalogPin")
    assert len(pin) == 64 and int(pin, 16) >= 0
    assert sent == {
        "phase": "request",
        "serviceNames": ["docs"],
        "method": "tools/call",
        "mcpRequest": {"name": "echo", "arguments": {"text": "hi"}},
        "metadataContext": {
            "check": "tool_arguments",
            "target": "echo",
            "backend": "docs",
            "rule": "echo",
            "policyVersion": "v1",
            "requestId": "r",
            "principal": {
                "issuer": "https://id.example",
                "subject": "erin",
                "clientId": "cli",
                "claims": {"tid": "t-1", "org.unit": "r&d"},
            },
        },
    }


def test_a_result_is_a_response_phase_message_without_a_pin_when_there_is_no_tool() -> None:
    sent = json.loads(message(RESULT, WHO, claims=(), request_id="r"))
    assert (sent["phase"], sent["mcpResponse"], "mcpRequest" in sent) == (
        "response",
        {"contents": []},
        False,
    )
    assert "catalogPin" not in sent["metadataContext"]
    assert "claims" not in sent["metadataContext"]["principal"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"pass": {}}, Verdict("pass")),
        ({"pass": None, "headerMutation": {}, "metadata": {"a": 1}}, Verdict("pass")),
        ({"error": {"code": "PERMISSION_DENIED", "reason": "no"}}, Verdict("deny", reason="no")),
        ({"error": {"code": 1}}, Verdict("deny")),
        ({"error": {"reason": " \t "}}, Verdict("deny")),
        (
            {"mutated": {"name": "echo", "arguments": {"text": "x"}}},
            Verdict("mutated", changed={"text": "x"}),
        ),
        ({"mutated": {"arguments": {}}}, Verdict("mutated", changed={})),
        ({"mutated": {}}, Verdict("mutated", changed={})),
        ({"mutated": {"name": "other", "arguments": {}}}, Verdict("invalid")),
        ({"mutated": {"arguments": [1]}}, Verdict("invalid")),
        ({"mutated": "e30="}, Verdict("invalid")),  # ExtMCP's base64 bytes: not accepted here
    ],
)
def test_each_verdict_of_a_request(answer: Any, expected: Verdict) -> None:
    assert _verdict(answer) == expected


def test_a_changed_result_is_taken_whole_however_deep() -> None:
    assert _verdict({"mutated": {"contents": [1]}}, RESULT) == Verdict(
        "mutated", changed={"contents": [1]}
    )
    deep: Any = "x"
    for _ in range(40):  # a backend's reply may nest this deep, and so may its change
        deep = {"a": deep}
    found = _verdict({"mutated": {"structuredContent": deep}}, RESULT)
    assert found is not None and found.kind == "mutated"


@pytest.mark.parametrize(
    ("body", "kw"),
    [
        ({"pass": {}}, {"status": 201}),
        ({"pass": {}}, {"status": 500}),
        ({"pass": {}}, {"ctype": "text/plain"}),
        (b'{"pass": {}, "pass": {}}', {}),
        (b'{"pass": {}', {}),
        (b'{"pass": NaN}', {}),
        ({}, {}),
        ({"pass": {}, "mutated": {}}, {}),
        ({"error": "no"}, {}),
        ([{"pass": {}}], {}),
    ],
)
def test_what_is_not_a_verdict(body: Any, kw: dict[str, Any]) -> None:
    assert _verdict(body, **kw) is None


def test_a_reason_is_cleaned_and_bounded_for_the_client() -> None:
    found = _verdict({"error": {"reason": "a\x1b[31m b\u202e\u200bc\n" + "x" * 500}})
    assert found is not None and found.reason is not None
    assert found.reason.startswith("a [31m b c x")
    assert len(found.reason) == MAX_REASON_CHARS
