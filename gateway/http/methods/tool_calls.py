"""``tools/call``: visibility and step-up, the per-call limits, the backend call, the result cap.

A tool the caller may not see is ``unknown_tool`` (no existence leak); one it could call with
more scopes is ``tool_insufficient_scope`` naming every scope it needs; then the per-subject
rate limit and concurrency cap (429, :mod:`gateway.http.call_limits`), the expiry re-check, a
2026-07-28 input round's sealed state (:mod:`gateway.http.methods.input_rounds`), the backend call
under the request deadline (plus a short grace, bounded by a drain), and the response-size cap (an
oversized result becomes a tool error with a fixed text).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any, Final

from gateway.deadlines import deadline_at
from gateway.errors import (
    ArgumentNotSettable,
    ToolInsufficientScope,
    UnknownTool,
)
from gateway.http.drain import DrainBound
from gateway.http.guard_gate import Shown
from gateway.http.methods.approval_answers import ApprovalAnswers
from gateway.http.methods.consent_answers import ConsentAnswers
from gateway.http.methods.input_rounds import InputRounds
from gateway.http.methods.route_parts import RouteParts
from gateway.http.methods.task_creation import TaskCreation
from gateway.http.progress import ProgressRelay
from gateway.http.turn import BACKEND_GRACE_S, Route, Turn, check_expiry
from gateway.protocol.envelope import success_body
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import shape_call_result, tool_error_result
from gateway.seams import (
    AccessQuestion,
    Approvals,
    ConsentLinks,
    ConsentNeeded,
    Decision,
    InputRequired,
    JsonObject,
    Resume,
    TaskCreated,
    ToolCall,
    ToolDef,
)

__all__ = ["OVERSIZE_TEXT", "TIMEOUT_TEXT", "ToolCalls"]

_GATEWAY_MADE: Final = frozenset(
    {"invalid_arguments", "timeout", "upstream_error", "too_large", "exchange_failed"}
)
"""Call outcomes whose result is a fixed-text tool error the gateway made (never shown to a
processor: there is nothing of the backend's in it)."""

OVERSIZE_TEXT: Final = "The tool result exceeded the gateway's response size limit."
"""Fixed text of the tool error that replaces a result larger than ``max_response_bytes``."""
TIMEOUT_TEXT: Final = "The tool did not answer before the request deadline."
"""Fixed text of the tool error when the backend overruns the end-to-end deadline."""


class ToolCalls:
    """The route of ``tools/call``."""

    def __init__(
        self,
        parts: RouteParts,
        *,
        drain: DrainBound,
        tasks: TaskCreation | None = None,
        consent: ConsentLinks | None = None,
        approvals: Approvals | None = None,
    ) -> None:
        """``tasks``: the tasks extension's side of a call (None: no call becomes a task);
        ``consent``: the consent links of ``user_oauth`` backends (None: there are none);
        ``approvals``: the approval desk (None: no login surface, a rule's ``approval:`` fails
        closed)."""
        config, metrics = parts.config, parts.metrics
        self._backend = parts.backend
        self._tasks = tasks
        self._pdp = parts.decision_point
        self._limits = parts.limits
        self._drain = drain
        self._server = config.server
        self._cap = config.limits.max_response_bytes
        # Only the observer reads them, and only to log their shape (keys and types).
        self._log_arguments = config.logging.log_arguments
        self._inputs = InputRounds(config, metrics=metrics)
        self.consent = ConsentAnswers(consent, self._inputs, config.server)
        """How a caller is asked to connect a ``user_oauth`` backend's account."""
        self.approval = ApprovalAnswers(approvals, self._inputs, config)
        """How a call a rule holds for approval waits for it (docs/policy.md#approvals)."""
        self._conditions = parts.conditions
        self._guards = parts.guards
        self.exchanging = frozenset(
            b.name for b in config.backends if b.credential.type in ("token_exchange", "user_oauth")
        )
        """Backends whose calls carry the caller's token (wrapped): exchanged with it
        (``token_exchange``), or (``user_oauth``) only its digest read, so that a revocation
        drops what was cached for its person."""

    def routes(self) -> dict[str, Route]:
        return {"tools/call": Route(self._call, admit=self._admit, over_budget=self.over_budget)}

    def _admit(self, message: McpMessage, turn: Turn) -> str | None:
        # A batch member: step-up is checked for every member before any runs; an invisible
        # tool is left to answer its own unknown_tool entry.
        name = message.tool_name or ""
        decision = turn.decide(name)
        tool = self._backend.catalog().get(name)
        if tool is None or not decision.visible:
            return None
        if not decision.allowed:
            turn.ctx.tool, turn.ctx.decision = name, decision
            turn.ctx.backend = tool.backend or None
            raise ToolInsufficientScope(
                scopes=decision.required_scopes, missing=decision.missing_scopes
            )
        return name

    async def _call(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        ctx, principal, policy = turn.ctx, turn.principal, turn.policy
        arguments = message.arguments or {}
        tool, decision, question = self._permitted(message, turn, arguments)
        lease = None if admitted else await self._limits.admit_call(turn, tool.name)
        if self._log_arguments:
            ctx.extra["arguments"] = arguments
        try:
            if not admitted:
                check_expiry(turn)
            await self._consult(turn, question, arguments)
            # A retry of an input round: checked now, before anything goes upstream.
            resume = (
                self._inputs.resume(message, principal, policy.version, ctx, backend=tool.backend)
                if message.era == "modern"
                else None
            )
            after = resume
            if resume is not None and resume.consent:
                declined = self.consent.declined(resume, message, turn)
                if declined is not None:
                    return success_body(message.id, declined)
                resume = None  # the gateway's own round: nothing of it goes upstream
            elif resume is not None and resume.approval is not None:
                resume = None  # the gateway's own approval round: nothing of it goes upstream
            if decision.guardrails:  # the rule's processors see what goes upstream
                changed = await self._guards.arguments(turn, decision, tool, arguments)
                if changed is not None:
                    arguments = changed
                    await self._consult(turn, question, arguments)  # decided on what is sent
                if resume is not None:
                    resume = await self._guards.answers(turn, decision, tool, resume)
            if decision.approval is not None:  # runs only as a person approved it, once
                held = await self.approval.hold(decision.approval, message, turn, tool, after)
                if held is not None:
                    return success_body(message.id, held)
            call = self._tool_call(
                message,
                turn,
                tool,
                relay,
                resume,
                arguments=arguments,
                guarded=bool(decision.guardrails),
            )
            for attempt in (1, 2):
                try:
                    raw = await self._call_backend(call, turn)
                    break
                except ConsentNeeded as needed:
                    # The retry of an accepted consent: the person may be connecting right now.
                    if attempt == 2 or not await self.consent.waited(needed, turn, after):
                        answer = await self.consent.for_call(needed, message, turn, after)
                        return success_body(message.id, answer)
        finally:
            if lease is not None:
                await lease.release()
        if isinstance(raw, InputRequired):  # the upstream asks the user: seal and relay
            shaped = self._inputs.relay(
                raw,
                message,
                principal=principal,
                policy_version=policy.version,
                resume=resume,
                ctx=ctx,
            )
        elif isinstance(raw, TaskCreated):  # only ever for a call ToolCall.tasks allowed
            assert self._tasks is not None
            shaped = self._tasks.created(raw, principal, tool, ctx)
        else:
            result: Mapping[str, Any] = raw
            if decision.guardrails and ctx.outcome not in _GATEWAY_MADE:
                shown = Shown.of_tool("tool_result", tool)
                result = await self._guards.result(turn, decision, shown, raw)
            if ctx.outcome is None:
                ctx.outcome = "tool_error" if result.get("isError") is True else "ok"
            shaped = shape_call_result(result, era=message.era, server=self._server)
        if decision.approval is not None:
            self.approval.executed(turn)
        body = success_body(message.id, shaped)
        if len(body) > self._cap:
            ctx.outcome = "too_large"
            body = self.over_budget(message)
        return body

    async def _consult(
        self, turn: Turn, question: AccessQuestion, arguments: Mapping[str, Any]
    ) -> None:
        """``policy_external``, when configured: it can only narrow what the policy allowed.
        Asked about ``arguments`` (the caller's, or as the processors changed them; never the
        override's fixed ones): the conditions' own ``question`` when it holds just those."""
        if self._pdp is not None:
            if question.arguments is not arguments:
                question = dataclasses.replace(question, arguments=arguments)
            await self._pdp.consult(turn, question)

    def _permitted(
        self, message: McpMessage, turn: Turn, arguments: Mapping[str, Any]
    ) -> tuple[ToolDef, Decision, AccessQuestion]:
        """The tool this caller may call with ``arguments``, the decision (recorded on the
        context) and the question its conditions were asked; else its rejection row."""
        ctx = turn.ctx
        name = message.tool_name or ""
        ctx.tool = name
        tool = self._backend.catalog().get(name)
        decision = turn.decide(name)
        ctx.decision = decision
        if tool is None or not decision.visible:
            raise UnknownTool()
        ctx.backend = tool.backend or None
        if not decision.allowed:
            raise ToolInsufficientScope(
                scopes=decision.required_scopes, missing=decision.missing_scopes
            )
        if tool.closed_arguments:  # only tools with fixed or hidden arguments pay for this
            closed = tool.refused_arguments(arguments)
            if closed:
                raise ArgumentNotSettable(arguments=tuple(closed))
        # Conditions see the arguments the backend will get (fixed ones included).
        question = AccessQuestion(
            "tools/call", name, tool.backend or None, tool.sent_arguments(arguments)
        )
        self._conditions.enforce(turn, question)
        return tool, decision, question

    def _tool_call(
        self,
        message: McpMessage,
        turn: Turn,
        tool: ToolDef,
        relay: ProgressRelay | None,
        resume: Resume | None,
        *,
        arguments: Mapping[str, Any],
        guarded: bool,
    ) -> ToolCall:
        ctx = turn.ctx
        return ToolCall(
            tool=tool,
            arguments=tool.sent_arguments(arguments),
            era=message.era,
            protocol_version=message.version,
            progress_token=message.progress_token,
            accepts_sse=turn.accepts_sse,
            header_params=message.header_params or {},
            traceparent=ctx.traceparent,
            tracestate=ctx.tracestate,
            on_progress=relay,
            client_capabilities=message.client_capabilities if message.era == "modern" else {},
            resume=resume,
            caller_token=turn.caller_token if tool.backend in self.exchanging else None,
            # A guarded call is never a task: its result must pass the processors in this answer.
            tasks=self._tasks is not None
            and not guarded
            and self._tasks.may_create(message, turn.policy, tool),
        )

    async def _call_backend(
        self, call: ToolCall, turn: Turn
    ) -> JsonObject | InputRequired | TaskCreated:
        """The backend call under the request deadline plus grace (earlier when draining)."""
        ctx = turn.ctx
        began = time.monotonic()
        drain = self._drain
        try:
            with deadline_at(drain.bound(turn.deadline + BACKEND_GRACE_S)) as timer:
                drain.watch(timer)
                try:
                    return await self._backend.call_tool(call, turn.principal, ctx, turn.deadline)
                finally:
                    drain.unwatch(timer)
        except TimeoutError:
            ctx.outcome = "timeout"
            return tool_error_result(TIMEOUT_TEXT)
        finally:
            ctx.backend_ms = (time.monotonic() - began) * 1000.0

    def over_budget(self, message: McpMessage) -> bytes:
        """A ``tools/call`` result that does not fit the budget: a tool error, fixed text."""
        shaped = shape_call_result(
            tool_error_result(OVERSIZE_TEXT), era=message.era, server=self._server
        )
        return success_body(message.id, shaped)
