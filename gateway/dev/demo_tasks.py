"""The demo backend's slow tool, a task where the client can take one (the tasks extension).

DEVELOPMENT ONLY. ``notes_report {seconds}`` compiles a report of the notebook, taking
``seconds`` (1-30, default 5). A 2026-07-28 request that declares ``io.modelcontextprotocol/tasks``
(SEP-2663) gets a task at once (``resultType: "task"``) and polls ``tasks/get`` until it is
``completed``; ``tasks/cancel`` before then cancels it. Any other caller (the extension not
declared, a 2025 client) gets the report at once. The backend advertises the extension in
``server/discover``; its task requests need the extension declared (-32021) and ``Mcp-Name``
equal to ``taskId`` (-32020), and an unknown id is -32602. Task ids are random (the extension:
unguessable), status is computed from the clock (no background work), and tasks are forgotten
after their ``ttlMs``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from gateway.dev.demo_tools import DemoTools

__all__ = ["CAPABILITIES", "TASKS", "TASK_TOOLS", "DemoTaskError", "DemoTasks"]

TASKS: Final = "io.modelcontextprotocol/tasks"
CAPABILITIES: Final[Mapping[str, Any]] = {"extensions": {TASKS: {}}}
"""What ``server/discover`` adds to the backend's capabilities."""
TTL_MS: Final = 600_000
POLL_MS: Final = 1000
MAX_TASKS: Final = 1000
TASK_TOOLS: Final[tuple[dict[str, Any], ...]] = (
    {
        "name": "notes_report",
        "title": "Report on the notes",
        "description": "Compile a report of the notebook, slowly (seconds, default 5): a task "
        "for clients that take tasks (MCP tasks extension), the report at once for others.",
        "inputSchema": {
            "type": "object",
            "properties": {"seconds": {"type": "integer", "minimum": 1, "maximum": 30}},
            "additionalProperties": False,
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
)
_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})


class DemoTaskError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


@dataclass
class _Task:
    created: float
    done_at: float
    report: str
    cancelled_at: float | None = None


class DemoTasks:
    """The slow tool's tasks (one per backend)."""

    def __init__(self, tools: DemoTools, *, clock: Callable[[], float] = time.time) -> None:
        self._tools = tools
        self._clock = clock
        self._tasks: dict[str, _Task] = {}

    @staticmethod
    def handles(method: str, params: Mapping[str, Any]) -> bool:
        """Whether this request is the slow tool's or one of the extension's."""
        return method in _METHODS or (
            method == "tools/call" and params.get("name") == TASK_TOOLS[0]["name"]
        )

    def answer(
        self, method: str, params: Mapping[str, Any], declared: bool, name: str | None
    ) -> dict[str, Any]:
        """The result of a request :meth:`handles` (``declared``: the request's capabilities
        name the extension; ``name``: its ``Mcp-Name``); raises :class:`DemoTaskError`."""
        if method == "tools/call":
            return self._create(params) if declared else self.report(params)
        if not declared:
            raise DemoTaskError(
                -32021, "Missing required client capability", {"requiredCapabilities": CAPABILITIES}
            )
        task_id = params.get("taskId")
        if not isinstance(task_id, str) or name != task_id:
            raise DemoTaskError(-32020, "Header mismatch: Mcp-Name")
        self._forget()
        task = self._tasks.get(task_id)
        if task is None:
            raise DemoTaskError(-32602, "Failed to retrieve task: Task not found")
        now = self._clock()
        if method == "tasks/cancel" and task.cancelled_at is None and now < task.done_at:
            task.cancelled_at = now
        if method != "tasks/get":
            return {"resultType": "complete"}
        return {"resultType": "complete", **self._task(task_id, task)}

    def report(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The report itself (what a caller without tasks gets at once)."""
        notes = self._tools.notes
        lines = [f"#{note.id}: {note.text}" for note in notes[-20:]]
        text = f"Report on {len(notes)} note(s)" + ("".join(f"\n{line}" for line in lines))
        return {
            "resultType": "complete",
            "content": [{"type": "text", "text": text}],
            "isError": False,
        }

    def _create(self, params: Mapping[str, Any]) -> dict[str, Any]:
        arguments = params.get("arguments") or {}
        seconds = arguments.get("seconds", 5) if isinstance(arguments, Mapping) else 5
        if not (isinstance(seconds, int) and not isinstance(seconds, bool) and 1 <= seconds <= 30):
            text = "seconds must be an integer from 1 to 30"
            return {
                "resultType": "complete",
                "content": [{"type": "text", "text": text}],
                "isError": True,
            }
        self._forget()
        if len(self._tasks) >= MAX_TASKS:
            raise DemoTaskError(-32603, "Too many tasks")
        now = self._clock()
        task_id = secrets.token_urlsafe(16)
        report = self.report(params)["content"][0]["text"]
        self._tasks[task_id] = _Task(created=now, done_at=now + seconds, report=report)
        return {"resultType": "task", **self._task(task_id, self._tasks[task_id], brief=True)}

    def _task(self, task_id: str, task: _Task, *, brief: bool = False) -> dict[str, Any]:
        now = self._clock()
        if task.cancelled_at is not None:
            status, updated = "cancelled", task.cancelled_at
        elif now >= task.done_at:
            status, updated = "completed", task.done_at
        else:
            status, updated = "working", task.created
        out: dict[str, Any] = {
            "taskId": task_id,
            "status": status,
            "createdAt": _iso(task.created),
            "lastUpdatedAt": _iso(updated),
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_MS,
        }
        if status == "working":
            out["statusMessage"] = f"Compiling, about {max(1, round(task.done_at - now))} s left"
        if status == "completed" and not brief:
            out["result"] = {"content": [{"type": "text", "text": task.report}], "isError": False}
        return out

    def _forget(self) -> None:
        horizon = self._clock() - TTL_MS / 1000
        for task_id in [k for k, t in self._tasks.items() if t.created < horizon]:
            del self._tasks[task_id]


def _iso(instant: float) -> str:
    return datetime.fromtimestamp(instant, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
