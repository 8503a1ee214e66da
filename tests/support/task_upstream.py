"""A real 2026-07-28 upstream with the tasks extension, written to its text (SEP-2663; the
extension's ``specification/draft/tasks.md``), recording every request.

The official ``mcp`` SDK has an extension mechanism but no task support, so this server
implements the extension itself: it advertises ``io.modelcontextprotocol/tasks`` in
``server/discover``, creates a task for a task-supporting tool only when the request declares
the extension (otherwise it runs it synchronously, or answers ``-32021`` naming the extension
for a tool that needs a task), serves ``tasks/get`` / ``tasks/update`` / ``tasks/cancel``
(``-32021`` without the extension, ``-32020`` when ``Mcp-Name`` is not ``params.taskId``,
``-32602`` for an unknown task), and refuses ``tasks/result`` and ``tasks/list`` (``-32601``).
Its task ids are deliberately guessable (``task-1``, ``task-2``, ...): the gateway must never
hand them to a client. The tools are the conformance suite's fixtures:

- ``greet {name}``: synchronous, ``Hello, <name>!``;
- ``slow_compute {seconds, label}``: a task (or, without the extension, synchronous) that
  completes after ``seconds`` (cancelled when ``tasks/cancel`` arrives first);
- ``failing_job``: needs a task; completes with an ``isError`` result;
- ``protocol_error_job``: needs a task; fails with a JSON-RPC error whose message is internal;
- ``confirm_delete {filename}``: needs a task; waits for one elicitation, then
  ``Deleted <filename>`` or ``Kept <filename>``;
- ``multi_input``: needs a task; waits for two elicitations at once;
- ``test_tool_with_task``: an input round (``requestState``) asking for ``user_name``, then a
  task whose result greets the name.

Task status notifications (§Task Status Notifications): a ``subscriptions/listen`` naming
``taskIds`` (``-32021`` without the extension declared) is acknowledged with the ids it knows and
then gets a ``notifications/tasks`` (the full ``DetailedTask``, tagged with the subscription id)
at every status change of one of them, and on :meth:`TaskUpstream.push`. ``chatty`` adds a
``notifications/progress`` and a ``notifications/message`` about the task before each (which a
server MUST NOT send for a task: the gateway must drop them); ``broadcast`` sends every task's
statuses to every listener, named or not (a server that leaks: the gateway must drop them).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tests.support.upstreams import ModernUpstream

__all__ = ["TASKS", "TASK_TOOLS", "TaskUpstream", "UpstreamTask"]

TASKS = "io.modelcontextprotocol/tasks"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
NEEDS_TASK = frozenset(
    {"failing_job", "protocol_error_job", "confirm_delete", "multi_input", "test_tool_with_task"}
)


def _tool(tool: str, **properties: Any) -> dict[str, Any]:
    return {
        "name": tool,
        "description": f"{tool} (tasks fixture)",
        "inputSchema": {"type": "object", "properties": properties},
    }


TASK_TOOLS = (
    _tool("greet", name={"type": "string"}),
    _tool("slow_compute", seconds={"type": "number"}, label={"type": "string"}),
    _tool("failing_job"),
    _tool("protocol_error_job"),
    _tool("confirm_delete", filename={"type": "string"}),
    _tool("multi_input"),
    _tool("test_tool_with_task"),
)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _text(text: str, *, error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": error}


def _form(message: str, **properties: Any) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties},
        },
    }


@dataclass
class UpstreamTask:
    task_id: str
    tool: str
    status: str = "working"
    created: str = field(default_factory=_now)
    updated: str = field(default_factory=_now)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    asked: dict[str, Any] = field(default_factory=dict)
    """Outstanding input requests (key -> request)."""
    answers: dict[str, Any] = field(default_factory=dict)
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None
    on_change: Callable[[UpstreamTask], None] | None = None
    """Told of every status change (the upstream's listen streams)."""

    def touch(self, status: str) -> None:
        self.status, self.updated = status, _now()
        if self.on_change is not None:
            self.on_change(self)

    def detailed(self, ttl_ms: int | None, poll_ms: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttlMs": ttl_ms,
            "pollIntervalMs": poll_ms,
        }
        if self.status == "input_required":
            out["inputRequests"] = dict(self.asked)
        if self.status == "completed":
            out["result"] = self.result
        if self.status == "failed":
            out["error"] = self.error
            out["statusMessage"] = "Tool execution failed: internal db-7 unreachable"
        return out


@dataclass
class TaskUpstream(ModernUpstream):
    tools: list[dict[str, Any]] = field(default_factory=lambda: list(TASK_TOOLS))
    tasks: dict[str, UpstreamTask] = field(default_factory=dict)
    task_ttl_ms: int | None = 60_000
    poll_ms: int = 100
    advertise: bool = True
    """Advertise the extension in ``server/discover``."""
    rogue: bool = False
    """Answer every task-supporting call with a task, declared or not (breaks the MUST NOT)."""
    chatty: bool = False
    """Send progress and log notifications about a task on the listen stream (MUST NOT)."""
    broadcast: bool = False
    """Send every task's statuses to every listen stream, named or not."""
    listeners: list[tuple[Any, frozenset[str], asyncio.Queue[dict[str, Any] | None]]] = field(
        default_factory=list
    )
    """Open listen streams: (subscription id, acknowledged task ids, queue)."""
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def task_calls(self, method: str | None = None) -> list[dict[str, Any]]:
        """The params of every ``tasks/*`` request received (of ``method`` only, if given)."""
        return [
            r.json["params"]
            for r in self.requests
            if r.json
            and str(r.json.get("method", "")).startswith("tasks/")
            and (method is None or r.json["method"] == method)
        ]

    def push(self, task_id: str) -> None:
        """Send the task's current state on every listen stream that asked for it."""
        self._announce(self.tasks[task_id])

    def _announce(self, task: UpstreamTask) -> None:
        detailed = task.detailed(self.task_ttl_ms, self.poll_ms)
        for tag, ids, queue in self.listeners:
            if task.task_id not in ids and not self.broadcast:
                continue
            meta = {SUBSCRIPTION_ID: tag}
            if self.chatty:
                queue.put_nowait(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {
                            "_meta": meta,
                            "progressToken": task.task_id,
                            "progress": 1,
                            "message": task.task_id,
                        },
                    }
                )
                queue.put_nowait(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {
                            "_meta": meta,
                            "level": "info",
                            "data": f"{task.task_id} is {task.status}",
                        },
                    }
                )
            queue.put_nowait(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/tasks",
                    "params": {"_meta": meta, **detailed},
                }
            )

    async def _listen(
        self, request: web.Request, rid: Any, params: dict[str, Any], declared: bool
    ) -> web.StreamResponse:
        wanted = params.get("notifications") or {}
        asked = wanted.get("taskIds")
        if asked is not None and not declared:  # §Task Status Notifications: MUST
            return _error(
                rid,
                -32021,
                "Missing required client capability",
                {"requiredCapabilities": {"extensions": {TASKS: {}}}},
            )
        agreed = [i for i in asked or [] if i in self.tasks]
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        entry = (rid, frozenset(agreed), queue)
        self.listeners.append(entry)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        try:
            await response.prepare(request)
            ack: dict[str, Any] | None = {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {"_meta": {SUBSCRIPTION_ID: rid}, "notifications": {"taskIds": agreed}},
            }
            while ack is not None:
                await response.write(b"data: " + json.dumps(ack).encode() + b"\n\n")
                ack = await queue.get()
        finally:
            self.listeners.remove(entry)
        await response.write_eof()
        return response

    async def close(self) -> None:
        for _, _, queue in self.listeners:
            queue.put_nowait(None)
        for task in self.tasks.values():
            if task.runner is not None:
                task.runner.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task.runner

    async def handle(self, request: web.Request) -> web.StreamResponse:
        entry = await self._record(request)
        if self._authorized(request) is None:
            return web.Response(status=401, headers={"WWW-Authenticate": "Bearer"})
        msg = entry.json
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        meta = params.get("_meta") or {}
        declared = (meta.get("io.modelcontextprotocol/clientCapabilities") or {}).get(
            "extensions"
        ) or {}
        has_tasks = isinstance(declared.get(TASKS), dict)
        if rid is None:
            return web.Response(status=202)
        # streamable-http.mdx §Server Validation: the mirrored headers equal the body.
        named = {"tools/call": params.get("name")}.get(str(method), request.headers.get("Mcp-Name"))
        if request.headers.get("Mcp-Method") != method or request.headers.get("Mcp-Name") != named:
            return _error(rid, -32020, "Header mismatch")
        if method == "server/discover":
            capabilities: dict[str, Any] = {"tools": {}}
            if self.advertise:
                capabilities["extensions"] = {TASKS: {}}
            return self._ok(
                rid,
                {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": capabilities,
                    "ttlMs": 60_000,
                    "cacheScope": "public",
                },
            )
        if method == "tools/list":
            return self._ok(rid, {"tools": self.tools, "ttlMs": 60_000, "cacheScope": "public"})
        if method == "tools/call":
            return await self._call(rid, params, has_tasks or self.rogue)
        if method == "subscriptions/listen":
            return await self._listen(request, rid, params, has_tasks)
        if method in ("tasks/get", "tasks/update", "tasks/cancel"):
            if not has_tasks:
                return _error(
                    rid,
                    -32021,
                    "Missing required client capability",
                    {"requiredCapabilities": {"extensions": {TASKS: {}}}},
                )
            if request.headers.get("Mcp-Name") != params.get("taskId"):
                return _error(rid, -32020, "Header mismatch")
            task = self.tasks.get(str(params.get("taskId")))
            if task is None:
                return _error(rid, -32602, "Failed to retrieve task: Task not found")
            return self._ok(rid, self._task_method(method, task, params))
        return _error(rid, -32601, "Method not found", status=404)

    def _task_method(
        self, method: str, task: UpstreamTask, params: dict[str, Any]
    ) -> dict[str, Any]:
        if method == "tasks/get":
            return task.detailed(self.task_ttl_ms, self.poll_ms)
        if method == "tasks/update":
            for key, answer in (params.get("inputResponses") or {}).items():
                if key in task.asked:  # others are ignored (not outstanding)
                    del task.asked[key]
                    task.answers[key] = answer
            task.touch("input_required" if task.asked else "working")
            task.answered.set()
            return {}
        if task.status not in ("completed", "failed", "cancelled") and task.runner is not None:
            task.runner.cancel()
        return {}

    async def _call(self, rid: Any, params: dict[str, Any], tasks: bool) -> web.Response:
        name = params.get("name")
        args = params.get("arguments") or {}
        if name not in {t["name"] for t in self.tools}:
            return _error(rid, -32602, "Unknown tool")
        if name == "greet":
            return self._ok(rid, _text(f"Hello, {args.get('name')}!"))
        user_name = None
        if name == "test_tool_with_task":
            answer = (params.get("inputResponses") or {}).get("user_name") or {}
            user_name = (answer.get("content") or {}).get("name")
            if params.get("requestState") != "up:twt:1" or user_name is None:
                return self._ok(
                    rid,
                    {
                        "resultType": "input_required",
                        "inputRequests": {
                            "user_name": _form("Your name?", name={"type": "string"})
                        },
                        "requestState": "up:twt:1",
                    },
                )
        if not tasks:
            if name in NEEDS_TASK:
                return _error(
                    rid,
                    -32021,
                    "This tool needs a task",
                    {"requiredCapabilities": {"extensions": {TASKS: {}}}},
                )
            await asyncio.sleep(min(float(args.get("seconds") or 0), 5.0))
            return self._ok(rid, _text(f"Computed {args.get('label')}"))
        task = UpstreamTask(f"task-{next(self._ids)}", str(name), on_change=self._announce)
        self.tasks[task.task_id] = task
        task.runner = asyncio.create_task(self._run(task, args, user_name))
        created = {
            k: v
            for k, v in task.detailed(self.task_ttl_ms, self.poll_ms).items()
            if k not in ("result", "error", "inputRequests")
        }
        created["resultType"] = "task"
        return web.json_response({"jsonrpc": "2.0", "id": rid, "result": created})

    async def _run(self, task: UpstreamTask, args: dict[str, Any], user: str | None) -> None:
        try:
            if task.tool == "slow_compute":
                await asyncio.sleep(float(args.get("seconds") or 0))
                task.result = _text(f"Computed {args.get('label')}")
            elif task.tool == "failing_job":
                await asyncio.sleep(0.2)
                task.result = _text("Failed to process request: invalid input", error=True)
            elif task.tool == "protocol_error_job":
                await asyncio.sleep(0.1)
                task.error = {"code": -32603, "message": "panic at db-7: password hunter2"}
                task.touch("failed")
                return
            elif task.tool == "confirm_delete":
                answers = await self._ask(
                    task,
                    {
                        "confirm": _form(
                            f"Delete {args.get('filename')}?", confirm={"type": "boolean"}
                        )
                    },
                )
                ok = (answers["confirm"].get("content") or {}).get("confirm")
                task.result = _text(f"{'Deleted' if ok else 'Kept'} {args.get('filename')}")
            elif task.tool == "multi_input":
                named = {"type": "string"}
                await self._ask(
                    task,
                    {"first": _form("First?", name=named), "second": _form("Second?", name=named)},
                )
                task.result = _text("both answered")
            else:  # test_tool_with_task
                task.result = _text(f"Hello, {user}!")
            task.touch("completed")
        except asyncio.CancelledError:
            task.touch("cancelled")

    @staticmethod
    async def _ask(task: UpstreamTask, requests: dict[str, Any]) -> dict[str, Any]:
        task.asked = dict(requests)
        task.touch("input_required")
        while task.asked:
            task.answered.clear()
            await task.answered.wait()
        return task.answers


def _error(
    rid: Any, code: int, message: str, data: dict[str, Any] | None = None, *, status: int = 400
) -> web.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return web.json_response({"jsonrpc": "2.0", "id": rid, "error": error}, status=status)
