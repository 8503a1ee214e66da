"""``tasks/get``, ``tasks/update``, ``tasks/cancel``: a task request, checked, then relayed.

The tasks extension (SEP-2663; ext-tasks ``specification/draft/tasks.md``), 2026-07-28 only (it
is not defined on the 2025 revisions: there these are unknown methods). The ladder ran first:
``Mcp-Name`` equals ``params.taskId`` (-32020, §Streamable HTTP: Routing Headers), the handle as
the client sees it. Then, in order, before anything goes upstream:

1. the request declares the extension (-32021 naming it: §Error Handling, MUST);
2. the caller's budget for this handle (``tasks.min_poll_interval_ms``; the spec lets a server
   limit over-polling): 429, counted under ``rate_limited_total{scope="task"}``;
3. ``tasks/update``: ``inputResponses`` within ``input_requests.max_input_response_bytes``;
4. the handle opens (:mod:`gateway.protocol.task_handle`), is the caller's (issuer, subject,
   client id) and unexpired;
5. the policy, with the current token, still lets the caller call the tool as a task: the
   tool's decision, ``tasks: true``, the ``when:`` conditions that do not read arguments, then
   the external decision point (asked the ``tools/call`` question, without arguments); one
   that cannot decide is 503 ``policy_unavailable`` as for any call (the caller's own task).
   Steps 4 and 5 are :class:`gateway.http.task_access.TaskAccess`, which a listen for task
   statuses asks too;
6. the token is still unexpired (step 16).

Every failure of 4 and 5 is the one ``unknown_task`` answer, the same bytes as for a made-up
handle (a backend that does not know the task is answered so too); why is in the audit event
(``task.refused``). Then one request goes to the task's backend, with the restored id in the body
and ``Mcp-Name`` (:mod:`gateway.backend.upstream.task_call`), under the backend's credential (or the
caller's exchanged token). The answer carries the client's own handle, never the backend's id:
``ttlMs`` no longer than the handle lives, ``pollIntervalMs`` no shorter than the gateway's
interval, a completed task's ``result`` shaped as a tool result, a failed task's ``error`` with
a fixed message, an ``input_required`` task's ``inputRequests`` checked like an input round's
(shapes, and the capabilities this request declares: -32021 otherwise). A client disconnect
never cancels a task: only ``tasks/cancel`` does.

Every task request is audited (``task_get`` / ``task_update`` / ``task_cancel``, the handle's
digest); the first request on this replica that sees a terminal status is marked
(``task.event``) and counted in ``tasks_total``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from gateway.errors import BackendFailure, InvalidRequestState, MissingClientCapability, UnknownTask
from gateway.http.methods.route_parts import RouteParts
from gateway.http.progress import ProgressRelay
from gateway.http.task_access import TaskAccess, task_view
from gateway.http.turn import Route, Turn, bounded_success, check_expiry
from gateway.jsonkit.write import compact
from gateway.limits.keys import principal_key
from gateway.protocol.envelope import success_body
from gateway.protocol.input_required import known_kind_responses
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import META_SERVER_INFO, server_implementation
from gateway.protocol.task_handle import HandleRefused, TaskClaims, handle_digest
from gateway.protocol.tasks_extension import (
    REQUIRED_DATA,
    TASK_KEY,
    TASK_METHODS,
    TERMINAL,
    declares_tasks,
)
from gateway.seams import Task, TaskRelay, TaskRequest
from gateway.state.dpop_replay import MemoryReplays

__all__ = ["POLL_WINDOW_S", "TaskMethods", "poll_budget"]

POLL_WINDOW_S: Final = 60.0
_TERMINAL_REMEMBERED: Final = 100_000
"""Tasks whose terminal status this replica remembers having audited (bounded, oldest first)."""


def poll_budget(min_interval_ms: int) -> int:
    """Requests about one task a caller may make per :data:`POLL_WINDOW_S`: twice what a
    client honouring ``pollIntervalMs`` makes, so it is never refused."""
    return max(2, int(2 * POLL_WINDOW_S * 1000 / min_interval_ms))


class TaskMethods:
    """The routes of the tasks extension's methods (``tasks:`` on)."""

    def __init__(
        self,
        parts: RouteParts,
        *,
        access: TaskAccess,
        relay: TaskRelay,
        exchanging: frozenset[str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        config = parts.config
        self._access = access
        self._relay = relay
        self._limits = parts.limits
        self._exchanging = exchanging
        self._metrics = parts.metrics
        self._server = config.server
        self._cap = config.limits.max_response_bytes
        self._min_poll_ms = config.tasks.min_poll_interval_ms
        self._budget = poll_budget(self._min_poll_ms)
        self._max_responses = config.input_requests.max_input_response_bytes
        self._terminal = MemoryReplays(max_entries=_TERMINAL_REMEMBERED, clock=clock)

    def routes(self) -> dict[str, Route]:
        return {method: Route(self._run, eras=frozenset({"modern"})) for method in TASK_METHODS}

    async def _run(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        ctx, principal = turn.ctx, turn.principal
        if not declares_tasks(message.client_capabilities):
            raise MissingClientCapability(data=REQUIRED_DATA)
        handle = message.task_id or ""
        digest = handle_digest(handle)
        record: dict[str, Any] = {"handle": digest}
        ctx.extra[TASK_KEY] = record
        key = f"task:{principal_key(principal)}:{digest}"
        await self._limits.enforce_rate(key, self._budget, POLL_WINDOW_S, "task")
        responses = self._responses(message)
        try:
            claims = self._access.open(handle, principal)
            await self._access.authorize(claims, turn, record=True)
        except HandleRefused as refused:
            record["refused"] = refused.reason
            raise UnknownTask(detail=f"task handle refused: {refused.reason}") from None
        check_expiry(turn, admitted)
        reply = await self._relay.task_request(
            TaskRequest(
                method=message.method,  # type: ignore[arg-type]  # a TASK_METHODS route
                backend=claims.backend,
                task_id=claims.upstream_id,
                input_responses=responses,
                client_capabilities=message.client_capabilities,
                traceparent=ctx.traceparent,
                tracestate=ctx.tracestate,
                caller_token=turn.caller_token if claims.backend in self._exchanging else None,
            ),
            principal,
            ctx,
            turn.deadline,
        )
        if reply.unknown:
            record["refused"] = "upstream" if reply.configured else "backend"
            raise UnknownTask(detail="the backend does not know the task")
        if reply.fault is not None:
            ctx.outcome = "upstream_error"
            raise BackendFailure(detail=f"task request failed: {reply.fault}")
        ctx.outcome = "ok"
        if reply.task is None:  # tasks/update, tasks/cancel: an acknowledgement
            ack = {"resultType": "complete", "_meta": {META_SERVER_INFO: self._implementation}}
            return success_body(message.id, ack)
        return self._task_answer(reply.task, claims, handle, message, turn)

    @property
    def _implementation(self) -> dict[str, Any]:
        return server_implementation(self._server)

    def _responses(self, message: McpMessage) -> Mapping[str, Any] | None:
        """``tasks/update``'s answers: bounded, then only those that answer some input
        request kind (the gateway cannot know which kind a task's key asked for)."""
        responses = message.input_responses
        if message.method != "tasks/update" or responses is None:
            return None
        if len(compact(responses)) > self._max_responses:
            raise InvalidRequestState("responses_too_large")
        return known_kind_responses(responses)

    def _task_answer(
        self, task: Task, claims: TaskClaims, handle: str, message: McpMessage, turn: Turn
    ) -> bytes:
        record = turn.ctx.extra[TASK_KEY]
        record["status"] = task.status
        answer = task_view(
            task,
            claims,
            handle,
            capabilities=message.client_capabilities,
            server=self._server,
            min_poll_ms=self._min_poll_ms,
        )
        digest = str(record["handle"]).encode("ascii")
        if task.status in TERMINAL and self._terminal.record(digest, claims.expires_at):
            record["event"] = task.status
            if self._metrics is not None:
                self._metrics.tasks_total.labels(backend=claims.backend, event=task.status).inc()
        return bounded_success(message, answer, self._cap)
