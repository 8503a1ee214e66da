"""Prompts, resources and completions under the policy (MCP 2026-07-28 server/prompts.mdx,
server/resources.mdx, server/utilities/completion.mdx; the same methods in the 2025 revisions).

Every method exists only when some backend advertises its capability (``prompts``,
``resources``, ``completions``); otherwise it is ``method_not_found`` as before.

- ``prompts/list``, ``resources/list``, ``resources/templates/list``: the policy's per-method
  scopes (403 step-up), then only what the caller may use (or, with ``listing: step_up``, could
  use with more scopes); a hidden item never appears. Paged by the ``tools/list`` cursors;
  2026-07-28 results carry ``ttlMs`` and ``cacheScope: "private"`` (caching.mdx: the lists are
  filtered per caller).
- ``prompts/get``: a prompt the caller may not see, or that no backend offers, is
  ``unknown_prompt`` (the same bytes either way); one it could get with more scopes is the same
  403 step-up as a tool (``tool_insufficient_scope``); then the arguments are checked against
  the prompt's declared arguments (``invalid_prompt_arguments``), the rule's rate limit and
  concurrency, the expiry re-check, and the backend request.
- ``resources/read``: decided on the URI's normal form; hidden or absent is
  ``resource_not_found`` (2026-07-28: -32602) / ``legacy_resource_not_found`` (2025: -32002),
  answered without asking any backend when hidden; step-up as above. The result's contents
  count against ``limits.max_response_bytes`` (blobs base64-checked and bounded by the backend).
- ``completion/complete``: allowed when the referenced prompt (``ref/prompt``) or template
  (``ref/resource``) is visible and allowed for the caller; otherwise answered like that prompt
  or template not existing, or with the step-up 403.

Each ``prompts/get`` and ``resources/read`` leaves an audit event (prompt name / URI) and counts
``surface_requests_total{method, rule, outcome}`` (the matched rule, never the raw URI).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from gateway.config import Config
from gateway.errors import (
    BackendFailure,
    GatewayError,
    InvalidPromptArguments,
    LegacyResourceNotFound,
    MethodNotFound,
    ResourceNotFound,
    ToolInsufficientScope,
    UnknownPrompt,
)
from gateway.http.call_limits import CallLimits
from gateway.http.progress import ProgressRelay
from gateway.http.turn import (
    Route,
    Turn,
    bounded_success,
    check_expiry,
    require_method_scopes,
)
from gateway.observability.metrics import Metrics
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import shape_surface_result, surface_list_result
from gateway.seams import (
    Backend,
    Decision,
    Era,
    Surface,
    SurfaceReply,
    SurfaceRequest,
    listed,
)

__all__ = [
    "MAX_PROMPT_ARGUMENT_CHARS",
    "SURFACE_OUTCOMES",
    "SurfaceRoutes",
    "surface_capabilities",
]

MAX_PROMPT_ARGUMENT_CHARS: Final = 8192
"""Longest value of one prompt argument (characters)."""
MAX_AUDITED_URI: Final = 512
"""A URI in the audit trail is cut to this many characters."""
SURFACE_OUTCOMES: Final = (
    "ok", "denied", "not_found", "invalid_arguments", "upstream_error", "too_large",
)  # fmt: skip
"""``surface_requests_total`` outcome label values."""
_NOT_FOUND_CODES: Final = frozenset({-32602, -32002})


def not_found(era: Era | None) -> GatewayError:
    """The era's answer for a resource that does not exist (or is hidden)."""
    return LegacyResourceNotFound() if era == "legacy" else ResourceNotFound()


def surface_capabilities(turn: Turn, surface: Surface) -> dict[str, Any]:
    """The ``prompts``, ``resources``, ``completions`` capabilities for this caller: only those
    a backend offers *and* for which the policy shows the caller at least one item."""
    policy, who, listing = turn.policy, turn.principal, turn.policy.listing
    out: dict[str, Any] = {}
    if "prompts" in surface.offers and any(
        listed(policy.decide_prompt(who, p.name), listing) for p in surface.prompts
    ):
        out["prompts"] = {"listChanged": False}
    if "resources" in surface.offers and (
        any(listed(policy.decide_resource(who, r.uri), listing) for r in surface.resources)
        or any(listed(policy.decide_template(who, t.uri), listing) for t in surface.templates)
    ):
        out["resources"] = {"listChanged": False, "subscribe": False}
    if "completions" in surface.offers and ("prompts" in out or "resources" in out):
        out["completions"] = {}
    return out


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
    ) -> None:
        self._config = config
        self._backend = backend
        self._limits = limits
        self._metrics = metrics
        self._server = config.server
        self._cap = config.limits.max_response_bytes
        self._exchanging = exchanging

    def routes(self) -> dict[str, Route]:
        lists = {m: Route(self._list, admit=_admit_method) for m in _LIST_OFFER}
        return {
            **lists,
            "prompts/get": Route(self._get),
            "resources/read": Route(self._read),
            "completion/complete": Route(self._complete),
        }

    # --- lists ------------------------------------------------------------------------

    async def _list(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        surface = self._offered(message, _LIST_OFFER[message.method])
        require_method_scopes(turn, message.method)
        policy, who, listing = turn.policy, turn.principal, turn.policy.listing
        items: list[tuple[str, Mapping[str, Any]]]
        if message.method == "prompts/list":
            items = [
                (p.name, p.definition)
                for p in surface.prompts
                if listed(policy.decide_prompt(who, p.name), listing)
            ]
        elif message.method == "resources/list":
            items = [
                (r.uri, r.definition)
                for r in surface.resources
                if listed(policy.decide_resource(who, r.uri), listing)
            ]
        else:
            items = [
                (t.uri, t.definition)
                for t in surface.templates
                if listed(policy.decide_template(who, t.uri), listing)
            ]
        check_expiry(turn, admitted)
        result = surface_list_result(
            message.method,
            items,
            cursor=message.cursor,
            page_size=self._config.protocol.page_size,
            ttl_ms=self._ttl_ms(surface),
            era=message.era,
            server=self._server,
            request_id=message.id,
        )
        return bounded_success(message, result, self._cap)

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
        request = SurfaceRequest(
            "prompts/get",
            prompt.backend,
            {"name": prompt.upstream_name, "arguments": dict(arguments)},
            name=prompt.upstream_name,
            traceparent=turn.ctx.traceparent,
            tracestate=turn.ctx.tracestate,
            caller_token=turn.caller_token if prompt.backend in self._exchanging else None,
        )
        reply = await self._send(
            turn, decision, request, section="prompts", key=name, admitted=admitted
        )
        if reply.error_code in _NOT_FOUND_CODES:
            self._count(message.method, decision.rule, "not_found")
            raise UnknownPrompt()
        return self._answer(message, turn, decision, reply, ttl_ms=None)

    # --- resources/read -------------------------------------------------------------------

    async def _read(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        self._offered(message, "resources")
        uri = message.uri or ""
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
        reply = await self._send(
            turn, decision, request, section="resources", key=key, admitted=admitted
        )
        if reply.error_code in _NOT_FOUND_CODES:
            self._count(message.method, decision.rule, "not_found")
            raise not_found(message.era)
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

    async def _send(
        self,
        turn: Turn,
        decision: Decision,
        request: SurfaceRequest,
        *,
        section: str,
        key: str,
        admitted: bool,
    ) -> SurfaceReply:
        """The rule's rate limit and concurrency cap, the expiry re-check, the request."""
        rate, concurrency = turn.policy.limits(section, decision.rule)
        scope = section[:-1]
        lease = await self._limits.admit_rule(
            turn, f"{scope}:{turn.principal.subject}:{key}", rate, concurrency, scope
        )
        try:
            check_expiry(turn, admitted)
            return await self._request(turn, request)
        finally:
            if lease is not None:
                await lease.release()

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

    def _ttl_ms(self, surface: Surface) -> int:
        ttl_ms = self._config.protocol.tools_list_ttl_ms
        return ttl_ms if surface.ttl_ms is None else min(ttl_ms, surface.ttl_ms)

    def _count(self, method: str, rule: str | None, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.count_surface(method, rule, outcome)


_LIST_OFFER: Final = {
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
}


def _admit_method(message: McpMessage, turn: Turn) -> None:
    require_method_scopes(turn, message.method)
