"""A ``tools/call`` that becomes a task: whether it may, and the handle its creator gets.

The tasks extension (SEP-2663 §Capability Negotiation): a server MUST NOT return a task to a
client that did not declare the extension on that request. The gateway adds its own conditions
(:meth:`TaskCreation.may_create`): ``tasks:`` on, a 2026-07-28 client that declared the
extension on this call, and the rule governing the tool saying ``tasks: true``. Only then does
the backend hear of the extension (:attr:`gateway.seams.ToolCall.tasks`).

A backend's ``CreateTaskResult`` (checked by the backend layer) becomes the client's
(:meth:`TaskCreation.created`): the backend's id is sealed into a handle bound to the caller,
the backend and the tool (:mod:`gateway.protocol.task_handle`), living at least the task's
``ttlMs`` and at most ``tasks.max_ttl_s``. The call's audit event carries the handle's digest
(``task.event: created``), and ``tasks_total{event="created"}`` counts it. The creation was a
call: it counted against the tool's rate limit and concurrency like any.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, Final

from gateway.config import Config
from gateway.observability.metrics import Metrics
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import shape_call_result, tool_error_result
from gateway.protocol.task_handle import (
    HandleTooLarge,
    TaskClaims,
    TaskHandles,
    handle_digest,
)
from gateway.protocol.tasks_extension import TASK_KEY, client_task, declares_tasks
from gateway.seams import Policy, Principal, RequestContext, TaskCreated, ToolDef

__all__ = ["TOO_LARGE_TEXT", "TaskCreation", "handles_for"]

TOO_LARGE_TEXT: Final = "The tool's task is too large for the gateway to relay"
"""The tool error when the backend's task id (with the caller's names) does not fit a handle."""


def handles_for(config: Config) -> TaskHandles | None:
    """The handle codec of ``tasks:`` (None when tasks are off)."""
    if not config.tasks.enabled:
        return None
    inputs = config.input_requests
    return TaskHandles(inputs.seal_keys, inputs.seal_key_id, resource=config.resource)


def lifetime_s(ttl_ms: int | None, max_ttl_s: int) -> int:
    """How long a handle lives: the task's ``ttlMs`` rounded up to a second (unlimited: the
    bound), never past ``tasks.max_ttl_s``, never below a second."""
    if ttl_ms is None:
        return max_ttl_s
    return max(1, min(math.ceil(ttl_ms / 1000), max_ttl_s))


class TaskCreation:
    """The ``tools/call`` side of tasks (one per dispatcher)."""

    def __init__(
        self,
        config: Config,
        handles: TaskHandles | None,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._handles = handles
        self._max_ttl_s = config.tasks.max_ttl_s
        self._min_poll_ms = config.tasks.min_poll_interval_ms
        self._server = config.server
        self._metrics = metrics
        self._clock = clock

    def may_create(self, message: McpMessage, policy: Policy, tool: ToolDef) -> bool:
        """Whether this call may become a task (see the module docstring)."""
        return (
            self._handles is not None
            and message.era == "modern"
            and declares_tasks(message.client_capabilities)
            and policy.allows_tasks(tool.name)
        )

    def created(
        self, found: TaskCreated, principal: Principal, tool: ToolDef, ctx: RequestContext
    ) -> dict[str, Any]:
        """The client's ``CreateTaskResult`` for the backend's task (or, when the handle
        cannot be minted, a fixed tool error: the task is then not relayed)."""
        assert self._handles is not None  # may_create said so before the call went out
        now = int(self._clock())
        lifetime = lifetime_s(found.task.ttl_ms, self._max_ttl_s)
        claims = TaskClaims(
            backend=found.backend,
            upstream_id=found.task.task_id,
            issuer=principal.issuer,
            subject=principal.subject,
            client_id=principal.client_id,
            tool=tool.name,
            issued_at=now,
            expires_at=now + lifetime,
        )
        try:
            handle = self._handles.seal(claims)
        except HandleTooLarge:
            ctx.extra[TASK_KEY] = {"refused": "too_large"}
            ctx.outcome = "upstream_error"
            return shape_call_result(
                tool_error_result(TOO_LARGE_TEXT), era="modern", server=self._server
            )
        ctx.extra[TASK_KEY] = {
            "handle": handle_digest(handle),
            "status": found.task.status,
            "event": "created",
        }
        if self._metrics is not None:
            self._metrics.tasks_total.labels(backend=found.backend, event="created").inc()
        return client_task(
            found.task,
            handle,
            result_type="task",
            lifetime_ms=lifetime * 1000,
            min_poll_ms=self._min_poll_ms,
            server=self._server,
        )
