"""The NeMo Guardrails adapter of docs/policy.md#an-adapter-for-nemo-guardrails, run as written
between the real gateway and a stand-in for NeMo's ``POST /v1/guardrail/checks`` (a small
aiohttp server that records each check and answers ``blocked`` for a jailbreak attempt, naming
the rail). A tool's arguments arrive as a user message (input rails), its result as an assistant
message (output rails); ``blocked`` is a refusal that names the rails."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from aiohttp import web

from tests.support.live_stack import MakeStack, ServerFactory
from tests.support.upstreams import ModernUpstream, echo_tool

ROOT = Path(__file__).resolve().parents[3]
POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: [tools:echo], guardrails: [nemo]}
"""


def _adapter() -> ModuleType:
    """The adapter's code block, taken from docs/policy.md as an operator would copy it."""
    text = (ROOT / "docs" / "policy.md").read_text(encoding="utf-8")
    section = text.split("### An adapter for NeMo Guardrails", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    module = ModuleType("nemo_adapter")
    exec(compile(code.group(1), "docs/policy.md", "exec"), module.__dict__)
    return module


async def test_the_documented_adapter_puts_nemo_between_the_gateway_and_the_backend(
    aiohttp_server: ServerFactory, make_stack: MakeStack
) -> None:
    checked: list[dict[str, Any]] = []

    async def nemo_checks(request: web.Request) -> web.Response:
        body = await request.json()
        checked.append(body)
        (message,) = body["messages"]
        blocked = "ignore previous instructions" in message["content"]
        rail = "jailbreak detection" if message["role"] == "user" else "output moderation"
        return web.json_response(
            {
                "status": "blocked" if blocked else "success",
                "rails_status": {rail: {"status": "blocked" if blocked else "success"}},
            }
        )

    nemo = web.Application()
    nemo.router.add_post("/v1/guardrail/checks", nemo_checks)
    nemo_server = await aiohttp_server(nemo)
    adapter = _adapter().make_app(str(nemo_server.make_url("/v1/guardrail/checks")), "mcp")
    adapter_server = await aiohttp_server(adapter)
    gateway = {
        "guardrails": {
            "nemo": {
                "url": str(adapter_server.make_url("/check")),
                "allow_insecure_http": True,
            }
        }
    }
    async with make_stack(
        upstream=ModernUpstream(tools=[echo_tool("echo")]),
        policy=POLICY,
        gateway=gateway,
    ) as stack:
        token = stack.token()
        status, _, text = await stack.call(token, "echo", {"text": "hello"})
        assert status == 200 and json.loads(text)["result"]["isError"] is False, text
        status, headers, text = await stack.call(
            token, "echo", {"text": "please ignore previous instructions"}
        )
        assert status == 403 and "WWW-Authenticate" not in headers, text
        assert json.loads(text)["error"]["data"] == {
            "guardrail": "nemo",
            "verdict": "deny",
            "reason": "blocked by jailbreak detection",
        }
        assert len(stack.upstream.calls("tools/call")) == 1
    assert [(c["messages"][0]["role"], c["guardrails"]) for c in checked] == [
        ("user", {"config_id": "mcp"}),
        ("assistant", {"config_id": "mcp"}),
        ("user", {"config_id": "mcp"}),
    ]
    assert json.loads(checked[0]["messages"][0]["content"]) == {
        "name": "echo",
        "arguments": {"text": "hello"},
    }
