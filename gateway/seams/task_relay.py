"""Tasks relayed to a backend (the ``io.modelcontextprotocol/tasks`` extension): the task as
checked, what the front door asks of the backend that owns one, and the :class:`TaskRelay`
Protocol (``gateway/backend``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from gateway.seams.callers import CallerToken, Principal

if TYPE_CHECKING:
    from gateway.seams.requests import RequestContext

__all__ = [
    "HandleRefusal",
    "Task",
    "TaskCreated",
    "TaskMethod",
    "TaskRelay",
    "TaskReply",
    "TaskRequest",
    "TaskStatus",
]

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
TaskMethod = Literal["tasks/get", "tasks/update", "tasks/cancel"]
HandleRefusal = Literal[
    "malformed",
    "tampered",
    "expired",
    "issuer",
    "subject",
    "client",
    "backend",
    "policy",
    "upstream",
]
"""Why a task handle was refused (``gateway.protocol.task_handle``; audit ``task.refused``;
never the client's answer)."""


@dataclass(frozen=True, slots=True)
class Task:
    """A backend's task, checked and rebuilt (``gateway.protocol.tasks_extension.parse_task``): its
    own ``taskId``, never the client's handle."""

    task_id: str
    status: TaskStatus
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    input_requests: Mapping[str, Any] | None = None
    result: Mapping[str, Any] | None = None
    """``completed``: the tool's result (checked as a ``CallToolResult`` by the backend)."""
    error: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TaskCreated:
    """An upstream ``CreateTaskResult`` to a call that could become a task, checked."""

    backend: str
    """The backend that created it: the handle binds it."""
    task: Task


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """A checked ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` for the task's backend."""

    method: TaskMethod
    backend: str
    task_id: str
    """The backend's own id (restored from the handle): the body's ``taskId`` and ``Mcp-Name``."""
    input_responses: Mapping[str, Any] | None = None
    """``tasks/update``: the answers, already checked."""
    client_capabilities: Mapping[str, Any] | None = None
    """The request's ``_meta["io.modelcontextprotocol/clientCapabilities"]`` as received (the
    backend forwards its schema-known part, the extension among it)."""
    traceparent: str | None = None
    tracestate: str | None = None
    caller_token: CallerToken | None = None
    """Set only for a backend whose credential exchanges the caller's token (RFC 8693)."""


@dataclass(frozen=True, slots=True)
class TaskReply:
    """The backend's answer: a checked task (``tasks/get``), an acknowledgement, or why not."""

    task: Task | None = None
    acknowledged: bool = False
    unknown: bool = False
    """The backend does not know the task (``-32602``), or is no longer configured."""
    configured: bool = True
    """False: the task's backend is no longer configured (nothing was sent)."""
    fault: str | None = None
    """No usable answer (timeout, connection, garbled, another error)."""


class TaskRelay(Protocol):
    """**Protocol:** the backends' tasks (``gateway/backend/federation.py``)."""

    def task_backends(self) -> frozenset[str]:
        """The backends that advertise the extension (2026-07-28 upstreams only)."""
        ...

    async def task_request(
        self, request: TaskRequest, principal: Principal, ctx: RequestContext, deadline: float
    ) -> TaskReply:
        """Send one task request to ``request.backend`` only; never raises for an upstream
        fault (``TaskReply.fault``), and sends nothing to a backend not configured."""
        ...
