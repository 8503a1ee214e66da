"""Bounds and bad answers on the prompts/resources paths, and a legacy-era upstream.

Recording upstreams (:mod:`tests.support.upstreams`) answer ``resources/read`` with exactly
what a test sets, so the response cap is tested at and one byte past the limit, and garbled
contents (bad base64, an invalid media type, both ``text`` and ``blob``, an ``input_required``
result) are refused as ``backend_failure`` in both eras. A 2025-06-18 upstream (sessions, SSE
replies) serves prompts and resources to both client eras. The client's token reaches neither
the upstream nor the logs.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.support.live_stack import LiveStack, MakeStack
from tests.support.policy import policy_text
from tests.support.upstreams import LegacyUpstream, ModernUpstream

POLICY = policy_text(tools={"echo": ""}, prompts={"*": ""}, resources={"file:///**": ""})

CAP = 4096
URI = "file:///data/a.txt"


def contents(**item: Any) -> dict[str, Any]:
    return {"contents": [{"uri": URI, **item}]}


async def read(live: LiveStack, era: str = "modern") -> tuple[int, dict[str, str], str]:
    token = live.token("mcp:access")
    if era == "modern":
        return await live.modern(token, "resources/read", {"uri": URI}, name=URI)
    body = {"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": {"uri": URI}}
    return await live.post(token, body, {"MCP-Protocol-Version": "2025-06-18"})


@pytest.mark.row("backend_failure")
async def test_a_read_at_the_response_cap_passes_and_one_byte_more_fails(
    make_stack: MakeStack,
) -> None:
    upstream = ModernUpstream(answers={"resources/list": {"resources": []}})
    upstream.answers["resources/read"] = contents(mimeType="text/plain", text="x" * 100)
    async with make_stack(
        upstream=upstream,
        policy=POLICY,
        gateway={"limits": {"max_response_bytes": CAP}},
    ) as live:
        status, _, text = await read(live)
        assert status == 200, text
        fill = 100 + CAP - len(text.encode())
        upstream.answers["resources/read"] = contents(mimeType="text/plain", text="x" * fill)
        status, _, text = await read(live)
        assert (status, len(text.encode())) == (200, CAP)
        upstream.answers["resources/read"] = contents(mimeType="text/plain", text="x" * (fill + 1))
        status, _, text = await read(live)
        assert status == 502
        assert json.loads(text)["error"] == {"code": -32603, "message": "Upstream server error"}
        # Legacy: the same cap (what the upstream sends counts against it too).
        big = contents(mimeType="text/plain", text="x" * (2 * CAP))
        upstream.answers["resources/read"] = big
        status, _, text = await read(live, "legacy")
        assert status == 200 and json.loads(text)["error"]["code"] == -32603


@pytest.mark.parametrize(
    "item",
    [
        {"blob": "not base64!"},
        {"blob": "QUJD"[:3]},  # unpadded
        {"blob": base64.b64encode(b"ok").decode(), "mimeType": "image"},
        {"text": "x", "mimeType": "text/plain; charset"},
        {"text": "x", "blob": base64.b64encode(b"x").decode()},
        {"text": 5},
        {},
    ],
    ids=[
        "bad-base64",
        "unpadded",
        "mime-no-subtype",
        "bad-parameter",
        "text-and-blob",
        "text-not-string",
        "neither",
    ],
)
async def test_garbled_contents_are_refused_in_both_eras(
    make_stack: MakeStack,
    item: dict[str, Any],
) -> None:
    upstream = ModernUpstream(
        answers={"resources/list": {"resources": []}, "resources/read": contents(**item)}
    )
    async with make_stack(upstream=upstream, policy=POLICY) as live:
        status, _, text = await read(live)
        assert status == 502 and json.loads(text)["error"]["code"] == -32603
        status, _, text = await read(live, "legacy")
        assert status == 200 and json.loads(text)["error"]["code"] == -32603


async def test_a_good_blob_and_an_input_required_answer(make_stack: MakeStack) -> None:
    blob = base64.b64encode(bytes(range(256))).decode()
    upstream = ModernUpstream(
        answers={
            "resources/list": {"resources": []},
            "resources/read": contents(blob=blob, mimeType="application/octet-stream"),
        }
    )
    async with make_stack(upstream=upstream, policy=POLICY) as live:
        status, _, text = await read(live)
        assert status == 200
        assert json.loads(text)["result"]["contents"][0]["blob"] == blob
        upstream.answers["resources/read"] = {"resultType": "input_required", "inputRequests": {}}
        status, _, text = await read(live)
        assert status == 502  # input rounds are relayed for tools/call only


async def test_a_legacy_upstream_serves_prompts_and_resources_to_both_client_eras(
    make_stack: MakeStack,
    capfd: pytest.CaptureFixture[str],
) -> None:
    upstream = LegacyUpstream(
        answers={
            "prompts/list": {"prompts": [{"name": "hello", "arguments": [{"name": "who"}]}]},
            "prompts/get": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]
            },
            "resources/list": {"resources": [{"uri": URI, "name": "a", "mimeType": "text/plain"}]},
            "resources/templates/list": {"resourceTemplates": []},
            "resources/read": contents(text="from legacy"),
        }
    )
    async with make_stack(upstream=upstream, policy=POLICY) as live:
        token = live.token("mcp:access")
        status, _, text = await live.modern(token, "prompts/list")
        assert [p["name"] for p in json.loads(text)["result"]["prompts"]] == ["hello"]
        status, _, text = await live.modern(
            token, "prompts/get", {"name": "hello", "arguments": {"who": "x"}}, name="hello"
        )
        result = json.loads(text)["result"]
        assert status == 200 and result["resultType"] == "complete"
        assert result["messages"][0]["content"]["text"] == "hi"
        status, _, text = await read(live, "legacy")
        assert json.loads(text)["result"] == contents(text="from legacy")
        status, _, text = await read(live)
        assert json.loads(text)["result"]["contents"] == contents(text="from legacy")["contents"]
    sent = [r for r in upstream.requests if r.json and r.json.get("method") == "prompts/get"]
    assert sent[0].json["params"] == {"name": "hello", "arguments": {"who": "x"}}
    # Leak check: the caller's token never reached the upstream, the logs or the answers.
    assert all(token.encode() not in r.body for r in upstream.requests)
    assert all(token not in ";".join(r.headers.values()) for r in upstream.requests)
    captured = capfd.readouterr()
    assert token not in captured.out and token not in captured.err
