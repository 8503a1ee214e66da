"""End to end: the demo's slow tool is a task through the gateway (the tasks extension).

``mcp-gateway demo`` configures ``tasks:``, the demo policy says ``tasks: true`` for
``notes_report`` and the demo backend advertises the extension: a 2026-07-28 client that declares
it gets a handle and polls ``tasks/get`` (honouring ``pollIntervalMs``) until the report is done;
a client that does not gets the report at once. The backend never sees the client's handle.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from gateway.demo.stack import DemoStack
from tests.support.demo_stack import modern_body, modern_headers

TASKS = "io.modelcontextprotocol/tasks"


def declaring(body: dict[str, Any]) -> dict[str, Any]:
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {
        "extensions": {TASKS: {}}
    }
    return body


async def post(
    http: aiohttp.ClientSession,
    stack: DemoStack,
    token: str,
    method: str,
    params: Any,
    *,
    name: str | None = None,
) -> dict[str, Any]:
    body = declaring(modern_body(method, params))
    async with http.post(
        stack.mcp_url, json=body, headers=modern_headers(token, method, name)
    ) as response:
        assert response.status == 200, await response.text()
        return dict(json.loads(await response.text())["result"])


async def test_the_slow_report_is_a_task_polled_to_its_result(demo_stack: DemoStack) -> None:
    reader = demo_stack.tokens["reader"]
    async with aiohttp.ClientSession() as http:
        discover = await post(http, demo_stack, reader, "server/discover", {})
        assert discover["capabilities"]["extensions"] == {TASKS: {}}
        call = {"name": "notes_report", "arguments": {"seconds": 1}}
        created = await post(http, demo_stack, reader, "tools/call", call, name="notes_report")
        assert created["resultType"] == "task" and created["status"] == "working"
        handle = created["taskId"]
        assert handle.startswith("t1.")
        for _ in range(10):
            await asyncio.sleep(created["pollIntervalMs"] / 1000)  # the spec's pollIntervalMs
            poll = {"taskId": handle}
            task = await post(http, demo_stack, reader, "tasks/get", poll, name=handle)
            assert task["taskId"] == handle
            if task["status"] == "completed":
                break
        assert task["status"] == "completed"
        assert task["result"]["content"][0]["text"].startswith("Report on ")
    assert not demo_stack.backend.saw(handle)


async def test_without_the_extension_the_report_comes_at_once(demo_stack: DemoStack) -> None:
    body = modern_body("tools/call", {"name": "notes_report", "arguments": {"seconds": 30}})
    headers = modern_headers(demo_stack.tokens["reader"], "tools/call", "notes_report")
    async with (
        aiohttp.ClientSession() as http,
        http.post(demo_stack.mcp_url, json=body, headers=headers) as response,
    ):
        result = json.loads(await response.text())["result"]
    assert result["resultType"] == "complete"
    assert result["content"][0]["text"].startswith("Report on ")
