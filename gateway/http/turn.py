"""What a method handler gets and gives: the :class:`Turn`, the :class:`Route`, shared checks.

A method family (one module: :mod:`gateway.http.methods.listing`,
:mod:`gateway.http.methods.handshake`, :mod:`gateway.http.methods.tool_calls`) contributes one
:class:`Route` per JSON-RPC method it answers; :class:`gateway.http.pipeline.dispatch.Dispatcher`
looks the method up and runs the route. The checks here are the ones every family shares: the
per-method scopes (step 15), the expiry re-check (step 16) and the response cap on a result the
gateway builds itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web

from gateway.errors import BackendFailure, InsufficientScope, InvalidToken
from gateway.http.progress import ProgressRelay
from gateway.observability import spans
from gateway.protocol.envelope import success_body
from gateway.protocol.messages import McpMessage
from gateway.seams import CallerToken, Decision, Era, Policy, Principal, RequestContext

__all__ = [
    "BACKEND_GRACE_S",
    "Route",
    "Turn",
    "bounded_success",
    "check_expiry",
    "require_method_scopes",
]

BACKEND_GRACE_S: Final = 0.5
"""Extra time the backend gets past the deadline to turn its own timeout into a tool error."""


@dataclass(slots=True)
class Turn:
    """What one admitted HTTP request carries into dispatch (one policy snapshot)."""

    request: web.Request
    ctx: RequestContext
    policy: Policy
    principal: Principal
    deadline: float
    """``time.monotonic()`` instant by which the whole request must be answered."""
    accepts_sse: bool
    token_key: Callable[[], bytes]
    """The revocation key of the request's token, re-checked (401 once revoked here): what a
    stream that outlives the request is bound under (:meth:`gateway.seams.Authenticator.
    revocation_key`)."""
    decisions: dict[str, Decision] = field(default_factory=dict)
    caller_token: CallerToken | None = None
    """The caller's token, wrapped; only when a backend exchanges it (``Dispatcher.exchanging``)."""
    response_headers: dict[str, str] | None = None
    """Headers a route adds to its JSON answer (``initialize``: ``Mcp-Session-Id``)."""

    def decide(self, tool: str) -> Decision:
        """The policy decision for ``tool``, evaluated once per request."""
        decision = self.decisions.get(tool)
        if decision is None:
            with spans.child(POLICY_SPAN) as span:
                decision = self.policy.decide_tool(self.principal, tool)
                span.set(DECISION_ATTRIBUTE, _decided(decision))
            self.decisions[tool] = decision
        return decision


Run = Callable[[McpMessage, Turn, ProgressRelay | None, bool], Awaitable[bytes]]
"""``(message, turn, relay, admitted) -> success body``; rejections raise their GatewayError row.

``admitted``: a batch member whose HTTP-level checks the batch admission already ran."""
Stream = Callable[[McpMessage, Turn], Awaitable[web.StreamResponse]]
"""``(message, turn) -> the response it wrote``: a route that answers with its own stream."""
Admit = Callable[[McpMessage, Turn], str | None]
"""A batch member's HTTP-level checks that can run before any member does (step-up 403); returns
the tool name whose per-call limits (rate, concurrency) the member must pass, if any."""


@dataclass(frozen=True, slots=True)
class Route:
    """How one JSON-RPC method is answered."""

    run: Run
    eras: frozenset[Era] = frozenset({"modern", "legacy"})
    """The protocol eras in which the method exists; elsewhere it is ``method_not_found``."""
    admit: Admit | None = None
    over_budget: Callable[[McpMessage], bytes] | None = None
    """The stand-in for a result that does not fit the response budget (default: -32603)."""
    stream: Stream | None = None
    """A long-lived answer (``subscriptions/listen``): writes its own SSE response."""


def require_method_scopes(turn: Turn, method: str) -> None:
    """Step 15 for a method with per-method scopes: 403 step-up naming the missing ones."""
    with spans.child(POLICY_SPAN) as span:
        decision = turn.policy.decide_method(turn.principal, method)
        span.set(DECISION_ATTRIBUTE, _decided(decision))
    turn.ctx.decision = decision
    if not decision.allowed:
        raise InsufficientScope(scopes=decision.required_scopes, missing=decision.missing_scopes)


def check_expiry(turn: Turn, admitted: bool = False) -> None:
    """Step 16: a token that expired while the request waited is refused before dispatch.

    A batch member was checked once before the first member ran (``admitted``)."""
    if not admitted and turn.principal.expired():
        raise InvalidToken()


def bounded_success(message: McpMessage, result: Any, cap: int) -> bytes:
    """The success body for a result the gateway built; over ``cap`` it is ``backend_failure``."""
    body = success_body(message.id, result)
    if len(body) > cap:
        raise BackendFailure(detail="response over max_response_bytes")
    return body


POLICY_SPAN: Final = "mcp_gateway.policy"
DECISION_ATTRIBUTE: Final = "mcp_gateway.decision"


def _decided(decision: Decision) -> str:
    """The span's decision: ``allow``, ``deny`` (a step-up 403) or ``hidden`` (unknown)."""
    if decision.allowed:
        return "allow"
    return "deny" if decision.visible else "hidden"
