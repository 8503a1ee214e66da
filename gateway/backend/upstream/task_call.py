"""One backend's ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` (the tasks extension).

Sent as every request but ``tools/call`` is (:mod:`.method_call`): the gateway's ``_meta`` with
the client's known capabilities (the extension among them: a backend MUST refuse a task request
that does not declare it), canonical JSON of ``taskId`` (the backend's own id, restored from the
handle) and, for ``tasks/update``, the checked ``inputResponses``; ``Mcp-Name`` is the restored
id too (SEP-2663 §Streamable HTTP: Routing Headers), so the client's handle never reaches the
backend. Only a 2026-07-28 upstream takes them: the extension does not exist on the legacy
revisions.

The reply is read as a :class:`~gateway.seams.TaskReply`: ``tasks/get`` a checked task
(:func:`gateway.protocol.tasks_extension.parse_task`; a completed task's ``result`` checked as a
tool result), ``tasks/update`` / ``tasks/cancel`` an acknowledgement, ``-32602`` the backend does
not know the task, anything else a fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from gateway.backend.upstream.era import LinkState, modern_meta
from gateway.backend.upstream.method_call import Exchanged, MethodCall
from gateway.backend.upstream.request_headers import with_trace
from gateway.backend.upstream.rpc import UpstreamFault
from gateway.backend.upstream.tool_results import sanitize_result
from gateway.observability.logging import get_logger
from gateway.protocol.capabilities import known_capabilities
from gateway.protocol.tasks_extension import InvalidTask, parse_task
from gateway.seams import Task, TaskReply, TaskRequest

__all__ = ["UNKNOWN_TASK_CODE", "UpstreamTaskCall", "checked_task"]

UNKNOWN_TASK_CODE: Final = -32602
"""SEP-2663 §Error Handling: an invalid or nonexistent ``taskId`` is ``-32602``."""

_log = get_logger("gateway.backend")


class UpstreamTaskCall(MethodCall[TaskRequest, TaskReply]):
    """The task requests of one backend."""

    def _names(self, request: TaskRequest) -> tuple[str, str | None]:
        return request.method, request.task_id

    def _params(
        self, request: TaskRequest, state: LinkState, headers: Mapping[str, str]
    ) -> dict[str, Any]:
        if state.era != "modern":
            raise UpstreamFault("incompatible")  # no tasks before 2026-07-28
        params: dict[str, Any] = {"taskId": request.task_id}
        if request.input_responses is not None:
            params["inputResponses"] = dict(request.input_responses)
        capabilities = known_capabilities(request.client_capabilities or {})
        params["_meta"] = with_trace(modern_meta(capabilities=capabilities), headers)
        return params

    def _reply(self, exchanged: Exchanged, request: TaskRequest) -> TaskReply:
        if exchanged.fault is not None:
            return TaskReply(fault=exchanged.fault)
        if exchanged.errored:
            if exchanged.code == UNKNOWN_TASK_CODE:
                return TaskReply(unknown=True)
            return TaskReply(fault="upstream_error")
        result = exchanged.result
        if result is None or result.get("resultType", "complete") != "complete":
            return TaskReply(fault="garbled")
        if request.method != "tasks/get":
            return TaskReply(acknowledged=True)
        return self._task(result, request)

    def _failure(self, reply: TaskReply) -> str | None:
        if reply.fault is not None:
            return reply.fault
        return str(UNKNOWN_TASK_CODE) if reply.unknown else None

    def _task(self, result: dict[str, Any], request: TaskRequest) -> TaskReply:
        try:
            task = checked_task(result)
            if task.task_id != request.task_id:
                raise InvalidTask("another task's id")
        except InvalidTask as bad:
            _log.warning(
                "backend_request_failed",
                backend=self._settings.name,
                method=request.method,
                kind="bad_task",
                reason=str(bad),
            )
            return TaskReply(fault="garbled")
        return TaskReply(task=task)


def checked_task(raw: Any) -> Task:
    """A backend's ``DetailedTask`` (a ``tasks/get`` result, or the params of a
    ``notifications/tasks``) checked (:func:`~gateway.protocol.tasks_extension.parse_task`), a
    completed task's ``result`` as a tool result; raises
    :class:`~gateway.protocol.tasks_extension.InvalidTask`."""
    task = parse_task(raw, detailed=True)
    if task.result is not None:
        checked = sanitize_result(task.result)
        if checked is None:
            raise InvalidTask("completed task's result is not a tool result")
        task = replace(task, result=checked)
    return task
