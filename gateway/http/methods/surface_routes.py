"""Prompts, resources and completions under the policy (MCP 2026-07-28 server/prompts.mdx,
server/resources.mdx, server/utilities/completion.mdx; the same methods in the 2025 revisions).

Every method exists only when some backend advertises its capability (``prompts``,
``resources``, ``completions``); otherwise it is ``method_not_found`` as before.

- ``prompts/list``, ``resources/list``, ``resources/templates/list`` and the capabilities
  advertised per caller: :mod:`gateway.http.methods.surface_lists`.
- ``prompts/get``: a prompt the caller may not see, or that no backend offers, is
  ``unknown_prompt`` (the same bytes either way); one it could get with more scopes is the same
  403 step-up as a tool (``tool_insufficient_scope``); then the arguments are checked against
  the prompt's declared arguments (``invalid_prompt_arguments``), the rule's rate limit and
  concurrency, the expiry re-check, the external decision point (``policy_external``, when
  configured: it can only narrow), and the backend request.
- ``resources/read``: decided on the URI's normal form, which is also what the backend is asked
  for (``gateway.policy.uri``; a URI without one is ``ambiguous_resource_uri``, -32602 in both
  eras); hidden or absent is
  ``resource_not_found`` (2026-07-28: -32602) / ``legacy_resource_not_found`` (2025: -32002),
  answered without asking any backend when hidden; step-up, limits, expiry and the external
  decision point as above. The result's contents
  count against ``limits.max_response_bytes`` (blobs base64-checked and bounded by the backend).
- ``completion/complete``: allowed when the referenced prompt (``ref/prompt``) or template
  (``ref/resource``) is visible and allowed for the caller; otherwise answered like that prompt
  or template not existing, or with the step-up 403.

Each ``prompts/get`` and ``resources/read`` leaves an audit event (prompt name / URI) and counts
``surface_requests_total{method, rule, outcome}`` (the matched rule, never the raw URI).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from typing import Any, Final

from gateway.config import Config
from gateway.errors import (
    AmbiguousResourceUri,
    BackendFailure,
    ConditionArgumentsTooLarge,
    ConditionDenied,
    ExternalPolicyDenied,
    GuardrailDenied,
    InvalidPromptArguments,
    MethodNotFound,
    ToolInsufficientScope,
    UnknownPrompt,
)
from gateway.http.call_limits import CallLimits
from gateway.http.condition_gate import ConditionGate
from gateway.http.guard_gate import GuardGate
from gateway.http.methods.surface_lists import SurfaceLists, not_found
from gateway.http.progress import ProgressRelay
from gateway.http.turn import (
    Route,
    Turn,
    bounded_success,
    check_expiry,
)
from gateway.limits.keys import principal_key
from gateway.observability.metrics import Metrics
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import shape_surface_result
from gateway.seams import (
    AccessQuestion,
    Backend,
    Decision,
    DecisionPoint,
    GuardedCheck,
    Surface,
    SurfaceReply,
    SurfaceRequest,
)

__all__ = [
    "MAX_PROMPT_ARGUMENT_CHARS",
    "SURFACE_OUTCOMES",
    "SurfaceRoutes",
]

MAX_PROMPT_ARGUMENT_CHARS: Final = 8192
"""Longest value of one prompt argument (characters)."""
MAX_AUDITED_URI: Final = 512
"""A URI in the audit trail is cut to this many characters."""
SURFACE_OUTCOMES: Final = (
    "ok",
    "denied",
    "not_found",
    "invalid_arguments",
    "upstream_error",
    "too_large",
)
"""``surface_requests_total`` outcome label values."""
_NOT_FOUND_CODES: Final = frozenset({-32602, -32002})


class SurfaceRoutes:
    """The routes of the prompts, resources and completion methods."""

    def __init__(
        self,
        *,
        config: Config,
        backend: Backend,
        limits: CallLimits,
        metrics: Metrics | None = None,
        exchanging: frozenset[str] = frozenset(),
        decision_point: DecisionPoint | None = None,
        conditions: ConditionGate | None = None,
        guards: GuardGate | None = None,
    ) -> None:
        self._conditions = conditions or ConditionGate(metrics)
        self._guards = guards or GuardGate(None, self._conditions)
        self._config = config
        self._pdp = decision_point
        """``policy_external``: asked after step-up, the limits and the expiry re-check."""
        self._backend = backend
        self._limits = limits
        self._metrics = metrics
        self._server = config.server
        self._cap = config.limits.max_response_bytes
        self._exchanging = exchanging

    def routes(self) -> dict[str, Route]:
        return {
            **SurfaceLists(
                config=self._config, backend=self._backend, conditions=self._conditions
            ).routes(),
            "prompts/get": Route(self._get),
            "resources/read": Route(self._read),
            "completion/complete": Route(self._complete),
        }

    # --- prompts/get --------------------------------------------------------------------

    async def _get(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        surface = self._offered(message, "prompts")
        name = message.prompt_name or ""
        turn.ctx.extra["audit_target"] = ("prompt_get", "prompt", name[:MAX_AUDITED_URI])
        prompt = surface.prompt(name)
        decision = turn.policy.decide_prompt(turn.principal, name)
        turn.ctx.decision = decision
        if prompt is None or not decision.visible:
            self._count(message.method, None, "not_found")
            raise UnknownPrompt()
        turn.ctx.backend = prompt.backend
        self._step_up(message, decision)
        arguments = message.arguments
        declared = dict(prompt.arguments)
        if (
            any(key not in declared for key in arguments)
            or any(required and key not in arguments for key, required in declared.items())
            or any(len(value) > MAX_PROMPT_ARGUMENT_CHARS for value in arguments.values())
        ):
            self._count(message.method, decision.rule, "invalid_arguments")
            raise InvalidPromptArguments()
        self._conditioned(message, turn, decision, "prompts", name, arguments, prompt.backend)
        request = SurfaceRequest(
            "prompts/get",
            prompt.backend,
            {"name": prompt.upstream_name, "arguments": dict(arguments)},
            name=prompt.upstream_name,
            traceparent=turn.ctx.traceparent,
            tracestate=turn.ctx.tracestate,
            caller_token=turn.caller_token if prompt.backend in self._exchanging else None,
        )
        question = AccessQuestion("prompts/get", name, prompt.backend, dict(arguments))
        reply = await self._send(
            turn,
            decision,
            request,
            section="prompts",
            key=name,
            admitted=admitted,
            question=question,
        )
        if reply.error_code in _NOT_FOUND_CODES:
            self._count(message.method, decision.rule, "not_found")
            raise UnknownPrompt()
        reply = await self._guarded(
            message, turn, decision, reply, "prompt_result", name, prompt.backend
        )
        return self._answer(message, turn, decision, reply, ttl_ms=None)

    # --- resources/read -------------------------------------------------------------------

    async def _read(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        self._offered(message, "resources")
        sent = message.uri or ""
        turn.ctx.extra["audit_target"] = ("resource_read", "uri", sent[:MAX_AUDITED_URI])
        try:
            uri = turn.policy.resource_uri(sent)
        except AmbiguousResourceUri:
            self._count(message.method, None, "invalid_arguments")
            raise
        if uri is None:
            self._count(message.method, None, "not_found")
            raise not_found(message.era)
        # From here on only the normal form: what the policy, the conditions, the external
        # decision point and the audit trail see is the URI the backend is asked for.
        turn.ctx.extra["audit_target"] = ("resource_read", "uri", uri[:MAX_AUDITED_URI])
        decision = turn.policy.decide_resource(turn.principal, uri)
        turn.ctx.decision = decision
        route = self._backend.route_uri(uri) if decision.visible else None
        if route is None:
            self._count(message.method, None, "not_found")
            raise not_found(message.era)
        backend, own_uri = route
        turn.ctx.backend = backend
        self._step_up(message, decision)
        self._conditioned(message, turn, decision, "resources", uri, {}, backend)
        request = SurfaceRequest(
            "resources/read",
            backend,
            {"uri": own_uri},
            name=own_uri,
            traceparent=turn.ctx.traceparent,
            tracestate=turn.ctx.tracestate,
            caller_token=turn.caller_token if backend in self._exchanging else None,
        )
        key = decision.rule or ""
        question = AccessQuestion("resources/read", uri, backend)
        reply = await self._send(
            turn,
            decision,
            request,
            section="resources",
            key=key,
            admitted=admitted,
            question=question,
        )
        if reply.error_code in _NOT_FOUND_CODES:
            self._count(message.method, decision.rule, "not_found")
            raise not_found(message.era)
        reply = await self._guarded(message, turn, decision, reply, "resource_result", uri, backend)
        return self._answer(message, turn, decision, reply, ttl_ms=0)

    # --- completion/complete ------------------------------------------------------------

    async def _complete(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        surface = self._offered(message, "completions")
        completion = message.completion
        assert completion is not None  # classify guarantees it for this method
        policy, who = turn.policy, turn.principal
        ref: dict[str, Any]
        if completion.ref_type == "ref/prompt":
            prompt = surface.prompt(completion.ref)
            decision = policy.decide_prompt(who, completion.ref)
            if prompt is None or not decision.visible:
                raise UnknownPrompt()
            backend, ref = prompt.backend, {"type": "ref/prompt", "name": prompt.upstream_name}
        else:
            template = surface.template(completion.ref)
            decision = policy.decide_template(who, completion.ref)
            if template is None or not decision.visible:
                raise not_found(message.era)
            backend, ref = template.backend, {"type": "ref/resource", "uri": template.upstream_uri}
        turn.ctx.decision = decision
        turn.ctx.backend = backend
        self._step_up(message, decision)
        if completion.ref_type == "ref/prompt":
            # The prompt's conditions that read no arguments (a completion has none to give).
            self._conditioned(message, turn, decision, "prompts", completion.ref, None, backend)
        check_expiry(turn, admitted)
        params: dict[str, Any] = {
            "ref": ref,
            "argument": {"name": completion.argument, "value": completion.value},
        }
        if completion.context:
            params["context"] = {"arguments": dict(completion.context)}
        request = SurfaceRequest(
            "completion/complete",
            backend,
            params,
            traceparent=turn.ctx.traceparent,
            tracestate=turn.ctx.tracestate,
            caller_token=turn.caller_token if backend in self._exchanging else None,
        )
        reply = await self._request(turn, request)
        return self._answer(message, turn, decision, reply, ttl_ms=None)

    # --- shared -------------------------------------------------------------------------

    def _offered(self, message: McpMessage, capability: str) -> Surface:
        surface = self._backend.surface()
        if capability not in surface.offers:
            raise MethodNotFound()
        return surface

    def _step_up(self, message: McpMessage, decision: Decision) -> None:
        if not decision.allowed:
            self._count(message.method, decision.rule, "denied")
            raise ToolInsufficientScope(
                scopes=decision.required_scopes, missing=decision.missing_scopes
            )

    def _conditioned(  # noqa: PLR0917 - one call shape, three callers in this class
        self,
        message: McpMessage,
        turn: Turn,
        decision: Decision,
        section: str,
        name: str,
        arguments: Mapping[str, Any] | None,
        backend: str,
    ) -> None:
        """The rule's ``when:`` conditions (403 ``condition_denied``, no step-up)."""
        try:
            self._conditions.enforce(turn, section, name, arguments, backend)
        except (ConditionDenied, ConditionArgumentsTooLarge):
            self._count(message.method, decision.rule, "denied")
            raise

    async def _send(
        self,
        turn: Turn,
        decision: Decision,
        request: SurfaceRequest,
        *,
        section: str,
        key: str,
        admitted: bool,
        question: AccessQuestion,
    ) -> SurfaceReply:
        """The rule's rate limit and concurrency cap, the expiry re-check, the external
        decision point (when configured), the request."""
        rate, concurrency = turn.policy.limits(section, decision.rule)
        scope = section[:-1]
        lease = await self._limits.admit_rule(
            turn, f"{scope}:{principal_key(turn.principal)}:{key}", rate, concurrency, scope
        )
        try:
            check_expiry(turn, admitted)
            if self._pdp is not None:
                try:
                    await self._pdp.consult(turn.principal, question, turn.ctx, turn.deadline)
                except ExternalPolicyDenied:
                    self._count(request.method, decision.rule, "denied")
                    raise
            return await self._request(turn, request)
        finally:
            if lease is not None:
                await lease.release()

    async def _guarded(  # noqa: PLR0917 - one call shape, two callers in this class
        self,
        message: McpMessage,
        turn: Turn,
        decision: Decision,
        reply: SurfaceReply,
        check: GuardedCheck,
        target: str,
        backend: str,
    ) -> SurfaceReply:
        """The result as the rule's processors (``guardrails``) left it."""
        if not decision.guardrails or reply.result is None:
            return reply
        try:
            result = await self._guards.result(
                turn, decision, check, message.method, target, backend, reply.result
            )
        except GuardrailDenied:
            self._count(message.method, decision.rule, "denied")
            raise
        return dataclasses.replace(reply, result=result)

    async def _request(self, turn: Turn, request: SurfaceRequest) -> SurfaceReply:
        began = time.monotonic()
        try:
            return await self._backend.surface_request(
                request, turn.principal, turn.ctx, turn.deadline
            )
        finally:
            turn.ctx.backend_ms = (time.monotonic() - began) * 1000.0

    def _answer(
        self,
        message: McpMessage,
        turn: Turn,
        decision: Decision,
        reply: SurfaceReply,
        *,
        ttl_ms: int | None,
    ) -> bytes:
        if reply.result is None:
            turn.ctx.outcome = "upstream_error"
            self._count(message.method, decision.rule, "upstream_error")
            raise BackendFailure(detail=f"upstream {reply.fault or reply.error_code}")
        shaped = shape_surface_result(
            reply.result, era=message.era, server=self._server, ttl_ms=ttl_ms
        )
        try:
            body = bounded_success(message, shaped, self._cap)
        except BackendFailure:
            turn.ctx.outcome = "too_large"
            self._count(message.method, decision.rule, "too_large")
            raise
        turn.ctx.outcome = "ok"
        self._count(message.method, decision.rule, "ok")
        return body

    def _count(self, method: str, rule: str | None, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.count_surface(method, rule, outcome)
