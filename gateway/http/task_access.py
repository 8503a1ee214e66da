"""A task handle opened for its caller, the policy asked, and the task as that caller sees it.

The tasks extension (SEP-2663 §Security Considerations): every task request MUST be
authenticated and authorised. The gateway's handle (:mod:`gateway.protocol.task_handle`) binds
the backend's task id to its creator; this module is the one check of it, shared by the task
methods (:mod:`gateway.http.methods.task_methods`) and a listen for task statuses
(:mod:`gateway.http.subscriptions.task_listen`), so a handle is honoured by the same rules on
both paths:

1. :meth:`TaskAccess.open`: the handle opens (a gateway handle, unaltered, a listed key, this
   deployment), is unexpired and the caller's (issuer, subject, client id);
2. :meth:`TaskAccess.authorize`: the policy in force, with the current token, still lets the
   caller call the tool as a task (the tool's decision, ``tasks: true``, the ``when:``
   conditions that do not read arguments), then the external decision point (the
   ``tools/call`` question for the tool, without arguments).

Every failure is one :class:`~gateway.protocol.task_handle.HandleRefused`: the caller hears only
"unknown task" (or, on a listen, nothing about that handle). :func:`runs_as_task` is step 2's
local part under another policy snapshot, silently (a stream re-checks each notification under
the policy in force then). :func:`task_view` is the task as its creator gets it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from gateway.config import ServerInfo
from gateway.errors import ExternalPolicyDenied, MissingClientCapability
from gateway.http.condition_gate import ConditionGate
from gateway.http.turn import Turn
from gateway.protocol.capabilities import known_capabilities
from gateway.protocol.input_required import required_capabilities
from gateway.protocol.results import shape_call_result
from gateway.protocol.task_handle import HandleRefused, TaskClaims, TaskHandles, check_owner
from gateway.protocol.tasks_extension import client_task
from gateway.seams import AccessQuestion, DecisionPoint, Policy, Principal, Task

__all__ = ["TaskAccess", "runs_as_task", "task_view"]


class TaskAccess:
    """Opens handles for their caller and asks the policy about them (module docstring)."""

    def __init__(
        self,
        handles: TaskHandles,
        conditions: ConditionGate,
        decision_point: DecisionPoint | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._handles = handles
        self._conditions = conditions
        self._pdp = decision_point
        self._clock = clock

    def open(self, handle: str, principal: Principal) -> TaskClaims:
        """Step 1: the claims of ``principal``'s own unexpired handle; raises
        :class:`HandleRefused` for anything else."""
        claims = self._handles.open(handle)
        check_owner(claims, principal, self._clock())
        return claims

    async def authorize(self, claims: TaskClaims, turn: Turn, *, record: bool) -> None:
        """Step 2: raise :class:`HandleRefused` (``policy``) unless the caller may still call the
        task's tool as a task. ``record``: the request is about this one task (a task method):
        its tool, backend and decision go into the request's audit event."""
        ctx = turn.ctx
        decision = turn.decide(claims.tool)
        if record:
            ctx.tool, ctx.backend, ctx.decision = claims.tool, claims.backend, decision
        if not (decision.allowed and turn.policy.allows_tasks(claims.tool)):
            raise HandleRefused("policy")
        question = AccessQuestion("tools/call", claims.tool, claims.backend)
        if not self._conditions.listed(turn, question):
            raise HandleRefused("policy")
        if self._pdp is not None:
            try:
                await self._pdp.consult(turn, question)
            except ExternalPolicyDenied:
                raise HandleRefused("policy") from None


def runs_as_task(policy: Policy, who: Principal, claims: TaskClaims, *, client_ip: str) -> bool:
    """Whether ``policy`` lets ``who`` call the task's tool as a task: step 2 without the decision
    point. Silent, like :func:`~gateway.http.condition_gate.readable`: a condition error refuses
    without being counted or logged again (the task requests of the same rule do)."""
    if not (policy.decide_tool(who, claims.tool).allowed and policy.allows_tasks(claims.tool)):
        return False
    question = AccessQuestion("tools/call", claims.tool, claims.backend)
    return policy.decide_conditions(who, question, client_ip) is None


def task_view(
    task: Task,
    claims: TaskClaims,
    handle: str,
    *,
    capabilities: Mapping[str, Any],
    server: ServerInfo,
    min_poll_ms: int,
) -> dict[str, Any]:
    """The task as its creator gets it (a ``tasks/get`` result, or a ``notifications/tasks``'s
    params once the result members are taken out): its own handle for ``taskId``, never the
    backend's id; a completed task's ``result`` shaped as a tool result. An ``input_required``
    task's ``inputRequests`` must be answerable with ``capabilities`` (what this request
    declares; §Security Considerations: a task is not a higher-trust channel), else
    :class:`~gateway.errors.MissingClientCapability` naming what is missing."""
    if task.input_requests:
        missing = required_capabilities(task.input_requests, known_capabilities(capabilities))
        if missing:
            raise MissingClientCapability(data={"requiredCapabilities": missing})
    result = (
        shape_call_result(task.result, era="modern", server=server)
        if task.result is not None
        else None
    )
    return client_task(
        task,
        handle,
        result_type="complete",
        lifetime_ms=(claims.expires_at - claims.issued_at) * 1000,
        min_poll_ms=min_poll_ms,
        server=server,
        result=result,
    )
