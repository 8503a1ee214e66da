"""The tasks extension on the wire (``io.modelcontextprotocol/tasks``, SEP-2663, final).

Read from the spec repository's ``seps/2663-tasks-extension.md`` and the extension's
``specification/draft/tasks.md`` (modelcontextprotocol/ext-tasks). What the gateway checks and
rebuilds, both directions (canonical forwarding: only the members the extension defines, from
plain parsed JSON):

- :func:`declares_tasks` / :func:`without_tasks`: the extension in a client's per-request
  capabilities (§Capability Negotiation: a server MUST NOT return a task to a client that did
  not declare it *on that request*);
- :func:`parse_task`: a backend's ``CreateTaskResult`` (``resultType: "task"``) or ``tasks/get``
  result (a ``DetailedTask``): ``taskId`` a string of 1 to :data:`MAX_TASK_ID_BYTES` bytes, a
  known ``status``, ``createdAt`` / ``lastUpdatedAt`` short strings, ``ttlMs`` null or a
  non-negative integer, ``pollIntervalMs`` a positive integer when present, ``statusMessage`` a
  string (dropped past :data:`MAX_STATUS_MESSAGE`); on a detailed task the member of its status:
  ``inputRequests`` (checked like an input round's, :mod:`.input_required`), ``result`` (an
  object; the backend checks it as a tool result) or ``error`` (rebuilt with a fixed message:
  an upstream's own words never reach the client);
- :func:`client_task`: the task as the client gets it: the gateway's handle for ``taskId``,
  ``ttlMs`` no longer than the handle lives, ``pollIntervalMs`` no shorter than the gateway's
  poll budget allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final, Literal

from gateway.config import ServerInfo
from gateway.errors import MissingClientCapability
from gateway.protocol.input_required import InvalidInputRequired, parse_input_required
from gateway.protocol.results import (
    META_SERVER_INFO,
    TASKS_EXTENSION_NAME,
    server_implementation,
)
from gateway.seams import Task

__all__ = [
    "FAILED_TEXT",
    "MAX_STATUS_MESSAGE",
    "MAX_TASK_ID_BYTES",
    "REQUIRED_DATA",
    "STATUSES",
    "TASKS_EXTENSION",
    "TASK_KEY",
    "TASK_METHODS",
    "TERMINAL",
    "InvalidTask",
    "check_task_listen",
    "client_task",
    "declares_tasks",
    "requires_tasks",
    "without_tasks",
]

TASKS_EXTENSION: Final = TASKS_EXTENSION_NAME
TASK_KEY: Final = "task"
"""``RequestContext.extra`` key of the task record a call or task request leaves for its audit
event (:func:`gateway.observability.audit_records.task_record`)."""
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
"""The extension's methods (``tasks/result`` and ``tasks/list`` are gone: -32601)."""
STATUSES: Final = frozenset({"working", "input_required", "completed", "failed", "cancelled"})
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
MAX_TASK_ID_BYTES: Final = 256
MAX_STATUS_MESSAGE: Final = 1024
"""Longest ``statusMessage`` (characters) relayed; a longer one is dropped, not cut."""
_MAX_TIMESTAMP: Final = 64
FAILED_TEXT: Final = "Upstream task failed"
"""The message of a failed task's ``error`` (its code is the upstream's)."""
FAILED_CODE: Final = -32603


REQUIRED_DATA: Final[Mapping[str, Any]] = {
    "requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}
}
"""``data`` of the -32021 for a task request, or a listen for task statuses, without the
extension (§Error Handling: MUST)."""


def check_task_listen(params: Mapping[str, Any], capabilities: Mapping[str, Any]) -> None:
    """A ``subscriptions/listen`` asking for task status notifications (``notifications.taskIds``)
    without the extension declared is -32021 (§Task Status Notifications, MUST). With it, the
    handles are decided on by :mod:`gateway.http.subscriptions.task_listen`."""
    wanted = params.get("notifications")
    asked = isinstance(wanted, Mapping) and wanted.get("taskIds") is not None
    if asked and not declares_tasks(capabilities):
        raise MissingClientCapability(data=REQUIRED_DATA)


class InvalidTask(ValueError):
    """A backend's task the gateway will not relay; the message is for logs only."""


def declares_tasks(capabilities: Mapping[str, Any]) -> bool:
    """Whether a ``ClientCapabilities`` object declares the extension (an object value)."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)


def without_tasks(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``capabilities`` without the extension (what an upstream gets when the task
    may not be created: the client did not declare it or the policy does not allow it)."""
    out = dict(capabilities)
    extensions = out.get("extensions")
    if isinstance(extensions, Mapping) and TASKS_EXTENSION in extensions:
        kept = {k: v for k, v in extensions.items() if k != TASKS_EXTENSION}
        if kept:
            out["extensions"] = kept
        else:
            del out["extensions"]
    return out


def requires_tasks(required: Mapping[str, Any]) -> bool:
    """Whether an upstream ``-32021`` ``requiredCapabilities`` names the extension."""
    return declares_tasks(required)


def parse_task(raw: Any, *, detailed: bool) -> Task:
    """The task of a ``CreateTaskResult`` (``detailed=False``: its status members are ignored)
    or of a ``tasks/get`` result; raises :class:`InvalidTask`."""
    if not isinstance(raw, Mapping):
        raise InvalidTask("task not an object")
    task_id = raw.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidTask("taskId")
    if len(task_id.encode("utf-8", "surrogatepass")) > MAX_TASK_ID_BYTES:
        raise InvalidTask("taskId too long")
    status = raw.get("status")
    if status not in STATUSES:
        raise InvalidTask("status")
    created, updated = raw.get("createdAt"), raw.get("lastUpdatedAt")
    if not (_timestamp(created) and _timestamp(updated)):
        raise InvalidTask("timestamps")
    if "ttlMs" not in raw:
        raise InvalidTask("ttlMs missing")
    ttl = raw["ttlMs"]
    if ttl is not None and not (_integer(ttl) and ttl >= 0):
        raise InvalidTask("ttlMs")
    poll = raw.get("pollIntervalMs")
    if poll is not None and not (_integer(poll) and poll > 0):
        raise InvalidTask("pollIntervalMs")
    message = raw.get("statusMessage")
    if not isinstance(message, str) or len(message) > MAX_STATUS_MESSAGE:
        message = None
    task = Task(task_id, status, str(created), str(updated), ttl, poll, message)
    if not detailed:
        return task
    if status == "input_required":
        return replace(task, input_requests=_input_requests(raw.get("inputRequests")))
    if status == "completed":
        result = raw.get("result")
        if not isinstance(result, Mapping):
            raise InvalidTask("completed task without result")
        return replace(task, result=result)
    if status == "failed":
        error = raw.get("error")
        code = error.get("code") if isinstance(error, Mapping) else None
        # The failure's code is the upstream's; its words (and data) are not relayed.
        return replace(
            task, error={"code": code if _integer(code) else FAILED_CODE, "message": FAILED_TEXT}
        )
    return task


def client_task(
    task: Task,
    handle: str,
    *,
    result_type: Literal["task", "complete"],
    lifetime_ms: int,
    min_poll_ms: int,
    server: ServerInfo,
    result: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``CreateTaskResult`` (``result_type="task"``) or ``GetTaskResult`` for the client.

    ``lifetime_ms``: how long the handle lives from creation (``ttlMs`` is never longer);
    ``min_poll_ms``: the gateway's poll interval (``pollIntervalMs`` is never shorter);
    ``result``: a completed task's tool result as the client gets it."""
    ttl = lifetime_ms if task.ttl_ms is None else min(task.ttl_ms, lifetime_ms)
    out: dict[str, Any] = {
        "resultType": result_type,
        "taskId": handle,
        "status": task.status,
        "createdAt": task.created_at,
        "lastUpdatedAt": task.last_updated_at,
        "ttlMs": ttl,
        "pollIntervalMs": max(task.poll_interval_ms or 0, min_poll_ms),
    }
    if task.status_message is not None and task.status != "failed":
        out["statusMessage"] = task.status_message
    if result_type == "complete":
        if task.input_requests is not None:
            out["inputRequests"] = dict(task.input_requests)
        if result is not None:
            out["result"] = dict(result)
        if task.error is not None:
            out["error"] = dict(task.error)
    out["_meta"] = {META_SERVER_INFO: server_implementation(server)}
    return out


def _input_requests(raw: Any) -> Mapping[str, Any]:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InvalidTask("inputRequests not an object")
    if not raw:
        return {}
    try:
        found = parse_input_required({"inputRequests": raw}, max_state_bytes=0)
    except InvalidInputRequired as bad:
        raise InvalidTask(f"inputRequests: {bad.reason}") from None
    return found.requests


def _timestamp(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= _MAX_TIMESTAMP and value.isprintable()


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
