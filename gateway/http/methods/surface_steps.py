"""What the prompts, resources and completion requests share on their way to a backend
(:mod:`gateway.http.methods.surface_routes`): the capability check, step-up, the rule's
conditions, limits and expiry re-check, the external decision point, the guardrails on the
result, the request itself and the answer, each counted in ``surface_requests_total``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, Final

from gateway.errors import (
    BackendFailure,
    ConditionArgumentsTooLarge,
    ConditionDenied,
    ExternalPolicyDenied,
    GatewayError,
    GuardrailDenied,
    MethodNotFound,
    ToolInsufficientScope,
)
from gateway.http.guard_gate import Shown
from gateway.http.methods.route_parts import RouteParts
from gateway.http.turn import Turn, bounded_success, check_expiry
from gateway.limits.keys import principal_key
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import shape_surface_result
from gateway.seams import (
    SECTIONS,
    AccessQuestion,
    Decision,
    GuardedCheck,
    Surface,
    SurfaceReply,
    SurfaceRequest,
)

__all__ = ["SurfaceSteps"]

_NOT_FOUND_CODES: Final = frozenset({-32602, -32002})
"""An upstream's error codes for a prompt or resource it does not have."""


class SurfaceSteps:
    """The steps of a surface request; :class:`~.surface_routes.SurfaceRoutes` orders them."""

    def __init__(self, parts: RouteParts, *, exchanging: frozenset[str] = frozenset()) -> None:
        """``exchanging``: the backends whose calls carry the caller's token."""
        config = parts.config
        self._parts = parts
        self._conditions = parts.conditions
        self._guards = parts.guards
        self._config = config
        self._pdp = parts.decision_point
        """``policy_external``: asked after step-up, the limits and the expiry re-check."""
        self._backend = parts.backend
        self._limits = parts.limits
        self._metrics = parts.metrics
        self._server = config.server
        self._cap = config.limits.max_response_bytes
        self._exchanging = exchanging

    def _upstream(
        self,
        turn: Turn,
        method: str,
        backend: str,
        params: dict[str, Any],
        name: str | None = None,
    ) -> SurfaceRequest:
        """The request for ``backend``: the request's trace context, and the caller's token only
        where that backend exchanges it."""
        return SurfaceRequest(
            method,
            backend,
            params,
            name=name,
            traceparent=turn.ctx.traceparent,
            tracestate=turn.ctx.tracestate,
            caller_token=turn.caller_token if backend in self._exchanging else None,
        )

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

    def _conditioned(
        self, message: McpMessage, turn: Turn, decision: Decision, question: AccessQuestion
    ) -> None:
        """The rule's ``when:`` conditions (403 ``condition_denied``, no step-up)."""
        try:
            self._conditions.enforce(turn, question)
        except (ConditionDenied, ConditionArgumentsTooLarge):
            self._count(message.method, decision.rule, "denied")
            raise

    async def _send(
        self,
        turn: Turn,
        decision: Decision,
        request: SurfaceRequest,
        question: AccessQuestion,
        *,
        key: str,
        admitted: bool,
        check: GuardedCheck,
        missing: Callable[[], GatewayError],
    ) -> SurfaceReply:
        """The rule's rate limit and concurrency cap, the expiry re-check, the external
        decision point (when configured), the request; ``missing()`` raised when the backend
        has no such prompt or resource; the result as the rule's processors (``guardrails``)
        left it."""
        section = SECTIONS[question.action]
        rate, concurrency = turn.policy.limits(section, decision.rule)
        scope = section[:-1]
        lease = await self._limits.admit_rule(
            turn, f"{scope}:{principal_key(turn.principal)}:{key}", rate, concurrency, scope
        )
        try:
            check_expiry(turn, admitted)
            if self._pdp is not None:
                try:
                    await self._pdp.consult(turn, question)
                except ExternalPolicyDenied:
                    self._count(request.method, decision.rule, "denied")
                    raise
            reply = await self._request(turn, request)
        finally:
            if lease is not None:
                await lease.release()
        if reply.error_code in _NOT_FOUND_CODES:
            self._count(request.method, decision.rule, "not_found")
            raise missing()
        if not decision.guardrails or reply.result is None:
            return reply
        try:
            shown = Shown(check, request.method, question.target, request.backend)
            result = await self._guards.result(turn, decision, shown, reply.result)
        except GuardrailDenied:
            self._count(request.method, decision.rule, "denied")
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
