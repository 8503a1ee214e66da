"""Tasks through the gateway, 2026-07-28 over HTTP, in front of a real task-capable upstream
(:class:`~tests.support.task_upstream.TaskUpstream`): create, poll, update, result, cancel.

SEP-2663 (the tasks extension): the client sees a handle sealed to it, never the backend's id;
the handle is the same on every answer; the backend gets its own id back in the body and in
``Mcp-Name``; a legacy client never sees a task.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.support.live_stack import MakeStack, ServerFactory, audit_events, modern_meta
from tests.support.raw_http import request_bytes
from tests.support.task_stack import CAPS, SCOPES, call, task, task_stack
from tests.support.task_upstream import TASKS, TaskUpstream


async def poll(
    stack: Any, token: str, handle: str, until: str, *, limit: int = 100
) -> dict[str, Any]:
    """``tasks/get`` until the status is ``until`` (or terminal); the last answer."""
    for _ in range(limit):
        status, _, body = await task(stack, token, "tasks/get", handle)
        assert status == 200, body
        result: dict[str, Any] = json.loads(body)["result"]
        if result["status"] == until or result["status"] in ("completed", "failed", "cancelled"):
            return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"task did not reach {until}")


async def test_discover_lists_the_extension_when_a_backend_offers_it(
    tmp_path: Path,
    aiohttp_server: ServerFactory,
    make_stack: MakeStack,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with make_stack.of(task_stack) as stack:
        status, _, text = await stack.modern(stack.token(SCOPES), "server/discover")
        assert status == 200
        assert json.loads(text)["result"]["capabilities"]["extensions"] == {TASKS: {}}
    upstream = TaskUpstream(advertise=False)
    async with task_stack(tmp_path / "b", aiohttp_server, monkeypatch, upstream=upstream) as stack:
        status, _, text = await stack.modern(stack.token(SCOPES), "server/discover")
        assert "extensions" not in json.loads(text)["result"]["capabilities"]


async def test_a_task_is_created_polled_with_a_stable_handle_and_completes(
    make_stack: MakeStack,
) -> None:
    upstream = TaskUpstream()
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        status, _, body = await call(stack, token, "slow_compute", {"seconds": 0.6, "label": "r"})
        assert status == 200, body
        created = body["result"]
        assert created["resultType"] == "task" and created["status"] == "working"
        handle = created["taskId"]
        assert handle.startswith("t1.") and "task-" not in handle
        assert created["ttlMs"] == 60_000 and created["pollIntervalMs"] == 100
        # The upstream got the extension on the call, and its own id is nowhere in the answer.
        sent = upstream.calls("tools/call")[-1].json["params"]["_meta"]
        assert TASKS in sent["io.modelcontextprotocol/clientCapabilities"]["extensions"]
        assert "task-1" not in json.dumps(body)
        seen = []
        for _ in range(10):
            status, _, raw = await task(stack, token, "tasks/get", handle)
            assert status == 200, raw
            seen.append(json.loads(raw)["result"])
        assert {r["taskId"] for r in seen} == {handle}
        assert all(r["resultType"] == "complete" for r in seen)
        done = await poll(stack, token, handle, "completed")
        assert done["status"] == "completed"
        assert done["result"]["content"] == [{"type": "text", "text": "Computed r"}]
        assert done["result"]["resultType"] == "complete"
        # Upstream: its own id in the body and in Mcp-Name, never the handle.
        for recorded in upstream.calls("tasks/get"):
            assert recorded.json["params"]["taskId"] == "task-1"
            assert recorded.headers["Mcp-Name"] == "task-1"
            assert handle not in recorded.body.decode()
        for _ in range(2):  # seen terminal again: counted and audited once
            assert (await task(stack, token, "tasks/get", handle))[0] == 200
        async with stack.session.get(stack.server.ops_url + "/metrics") as response:
            metrics = await response.text()
        counted = 'mcp_gateway_tasks_total{backend="default",event="%s"} 1.0'
        assert counted % "created" in metrics and counted % "completed" in metrics
        assert (
            'mcp_gateway_backend_requests_total{backend="default",outcome="task",'
            'tool="slow_compute"} 1.0'
        ) in metrics
    events = [e for e in audit_events(stack) if "task" in e]
    created_event = events[0]
    assert created_event["event"] == "tool_call" and created_event["outcome"] == "task"
    assert created_event["task"]["event"] == "created"
    digest = created_event["task"]["handle"]
    polls = [e for e in events if e["event"] == "task_get"]
    assert {e["task"]["handle"] for e in polls} == {digest}
    assert [e["task"].get("event") for e in polls].count("completed") == 1
    assert all(e["tool"] == "slow_compute" and e["backend"] == "default" for e in polls)


async def test_input_requests_are_relayed_and_answered_with_tasks_update(
    make_stack: MakeStack,
) -> None:
    upstream = TaskUpstream()
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        _, _, body = await call(stack, token, "confirm_delete", {"filename": "a.txt"})
        handle = body["result"]["taskId"]
        waiting = await poll(stack, token, handle, "input_required")
        assert waiting["status"] == "input_required"
        assert waiting["inputRequests"]["confirm"]["method"] == "elicitation/create"
        answer = {
            "confirm": {"action": "accept", "content": {"confirm": True}},
            "junk": {"not": "an answer"},
        }
        status, _, raw = await task(stack, token, "tasks/update", handle, responses=answer)
        assert status == 200, raw
        assert json.loads(raw)["result"]["resultType"] == "complete"
        assert "taskId" not in json.loads(raw)["result"]
        done = await poll(stack, token, handle, "completed")
        assert done["result"]["content"][0]["text"] == "Deleted a.txt"
        # Only the answer that is some input request's result went upstream.
        assert upstream.task_calls("tasks/update")[0]["inputResponses"] == {
            "confirm": {"action": "accept", "content": {"confirm": True}}
        }


async def test_a_failed_task_carries_the_code_but_not_the_upstream_words(
    make_stack: MakeStack,
) -> None:
    async with make_stack.of(task_stack) as stack:
        token = stack.token(SCOPES)
        _, _, body = await call(stack, token, "protocol_error_job")
        done = await poll(stack, token, body["result"]["taskId"], "failed")
        assert done["status"] == "failed"
        assert done["error"] == {"code": -32603, "message": "Upstream task failed"}
        assert "result" not in done and "statusMessage" not in done
        assert "hunter2" not in json.dumps(done) and "db-7" not in json.dumps(done)


async def test_cancel_is_relayed_and_acknowledged(make_stack: MakeStack) -> None:
    upstream = TaskUpstream()
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        _, _, body = await call(stack, token, "slow_compute", {"seconds": 60, "label": "x"})
        handle = body["result"]["taskId"]
        status, _, raw = await task(stack, token, "tasks/cancel", handle)
        assert status == 200 and json.loads(raw)["result"]["resultType"] == "complete"
        assert (await poll(stack, token, handle, "cancelled"))["status"] == "cancelled"
        assert upstream.task_calls("tasks/cancel") == [
            {"taskId": "task-1", "_meta": upstream.task_calls("tasks/cancel")[0]["_meta"]}
        ]


async def test_without_the_extension_on_the_request_no_task_is_made(make_stack: MakeStack) -> None:
    upstream = TaskUpstream()
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        status, _, body = await call(
            stack,
            token,
            "slow_compute",
            {"seconds": 0, "label": "s"},
            capabilities={"extensions": {"com.example/other": {}}},
        )
        assert status == 200 and body["result"]["resultType"] == "complete"
        assert body["result"]["content"][0]["text"] == "Computed s"
        sent = upstream.calls("tools/call")[-1].json["params"]["_meta"]
        assert sent["io.modelcontextprotocol/clientCapabilities"] == {
            "extensions": {"com.example/other": {}}
        }
        # A tool that needs a task: the upstream's -32021 reaches the client as itself.
        status, _, body = await call(stack, token, "failing_job", capabilities={})
        assert status == 400 and body["error"]["code"] == -32021
        assert body["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}


async def test_a_legacy_client_never_sees_a_task(make_stack: MakeStack) -> None:
    upstream = TaskUpstream()
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        status, _, text = await stack.legacy_call(token, "slow_compute", {"seconds": 0})
        result = json.loads(text)["result"]
        assert status == 200 and "taskId" not in result and "resultType" not in result
        assert result["content"][0]["text"] == "Computed None"
        sent = upstream.calls("tools/call")[-1].json["params"]["_meta"]
        assert sent["io.modelcontextprotocol/clientCapabilities"] == {}
        # The extension's methods do not exist on the 2025 revisions.
        body = {"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": "t1.x"}}
        status, _, text = await stack.post(token, body, {"MCP-Protocol-Version": "2025-06-18"})
        assert status == 200 and json.loads(text)["error"]["code"] == -32601
        assert upstream.task_calls() == []


async def test_a_backend_that_answers_a_task_unasked_is_an_upstream_error(
    make_stack: MakeStack,
) -> None:
    upstream = TaskUpstream(rogue=True)
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        status, _, body = await call(stack, token, "slow_compute", {"seconds": 1}, capabilities={})
        assert status == 200 and body["result"]["isError"] is True
        assert body["result"]["content"][0]["text"] == "Upstream tool failed"
        status, _, text = await stack.legacy_call(token, "slow_compute", {"seconds": 1})
        assert json.loads(text)["result"]["isError"] is True
    (event, legacy) = [e for e in audit_events(stack) if e["event"] == "tool_call"]
    assert event["outcome"] == "upstream_error" and event["task"] == {"refused": "unsolicited"}
    assert legacy["task"] == {"refused": "unsolicited"}


async def test_two_replicas_serve_one_tasks_polls_alternately(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two gateways with the same configuration and keys, nothing shared between them but the
    issuer and the backend: a handle one minted opens at the other (no server-side state)."""
    upstream = TaskUpstream()
    async with task_stack(tmp_path / "a", aiohttp_server, monkeypatch, upstream=upstream) as a:
        url = a.config.backends[0].url
        async with task_stack(
            tmp_path / "b", aiohttp_server, monkeypatch, backend_url=url, issuer=a.issuer
        ) as b:
            assert a.server.mcp_url != b.server.mcp_url
            token = a.token(SCOPES)
            _, _, body = await call(a, token, "confirm_delete", {"filename": "r.txt"})
            handle = body["result"]["taskId"]
            replicas = (a, b)
            for turn in range(6):
                status, _, raw = await task(replicas[turn % 2], token, "tasks/get", handle)
                assert status == 200 and json.loads(raw)["result"]["taskId"] == handle
            answer = {"confirm": {"action": "accept", "content": {"confirm": False}}}
            assert (await task(b, token, "tasks/update", handle, responses=answer))[0] == 200
            done = await poll(a, token, handle, "completed")
            assert done["result"]["content"][0]["text"] == "Kept r.txt"
            assert {p["taskId"] for p in upstream.task_calls()} == {"task-1"}


async def test_a_client_disconnect_does_not_cancel_a_task(make_stack: MakeStack) -> None:
    upstream = TaskUpstream()
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        _, _, body = await call(stack, token, "slow_compute", {"seconds": 0.5, "label": "d"})
        handle = body["result"]["taskId"]
        # The client sends a poll and goes away before the answer: the connection closes.
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tasks/get",
                "params": {"taskId": handle, "_meta": modern_meta(CAPS)},
            }
        ).encode()
        headers = {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Mcp-Method": "tasks/get",
            "Mcp-Name": handle,
            "MCP-Protocol-Version": "2026-07-28",
        }
        url = urlsplit(stack.server.mcp_url)
        _, writer = await asyncio.open_connection(url.hostname, url.port)
        writer.write(request_bytes(headers, body, path=url.path))
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        done = await poll(stack, token, handle, "completed")
        assert done["status"] == "completed"
        assert upstream.task_calls("tasks/cancel") == []


async def test_the_callers_token_reaches_neither_the_backend_nor_any_log_or_answer(
    make_stack: MakeStack,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Architecture invariant 4 on the task paths: creation, polls, an update, a cancel and the
    refusals (another caller, a tampered handle, no extension)."""
    upstream = TaskUpstream()
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        other = stack.token(SCOPES, sub="mallory")
        seen: list[str] = []
        _, headers, body = await call(stack, token, "confirm_delete", {"filename": "x"})
        seen += [json.dumps(body), json.dumps(headers)]
        handle = body["result"]["taskId"]
        answer = {"confirm": {"action": "accept", "content": {"confirm": True}}}
        for who, method, sent in (
            (token, "tasks/get", handle),
            (token, "tasks/update", handle),
            (token, "tasks/cancel", handle),
            (other, "tasks/get", handle),
            (token, "tasks/get", handle[:-2]),
        ):
            _, headers, raw = await task(stack, who, method, sent, responses=answer)
            seen += [raw.decode(), json.dumps(headers)]
        _, headers, raw = await task(stack, token, "tasks/get", handle, capabilities={})
        seen += [raw.decode(), json.dumps(headers)]
        async with stack.session.get(stack.server.ops_url + "/metrics") as response:
            seen.append(await response.text())
    seen.append(json.dumps(audit_events(stack)))
    seen += [r.body.decode() + json.dumps(dict(r.headers)) for r in upstream.requests]
    printed = capfd.readouterr()
    seen += [printed.out, printed.err]
    for secret in (token, other):
        assert not any(secret in text or secret[8:40] in text for text in seen)
    assert upstream.task_calls(), "the polls reached the backend (with the service credential)"
    assert {r.headers["Authorization"] for r in upstream.requests} == {"Bearer service-secret"}
