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

from typing import Any, Final

from gateway.errors import AmbiguousResourceUri, InvalidPromptArguments, UnknownPrompt
from gateway.http.methods.surface_lists import SurfaceLists, not_found
from gateway.http.methods.surface_steps import SurfaceSteps
from gateway.http.progress import ProgressRelay
from gateway.http.turn import Route, Turn, check_expiry
from gateway.protocol.messages import McpMessage
from gateway.seams import AccessQuestion

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


class SurfaceRoutes(SurfaceSteps):
    """The routes of the prompts, resources and completion methods."""

    def routes(self) -> dict[str, Route]:
        return {
            **SurfaceLists(self._parts).routes(),
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
        question = AccessQuestion("prompts/get", name, prompt.backend, dict(arguments))
        self._conditioned(message, turn, decision, question)
        params = {"name": prompt.upstream_name, "arguments": dict(arguments)}
        request = self._upstream(turn, "prompts/get", prompt.backend, params, prompt.upstream_name)
        reply = await self._send(
            turn,
            decision,
            request,
            question,
            key=name,
            admitted=admitted,
            check="prompt_result",
            missing=UnknownPrompt,
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
        # Resources rules read no arguments: the question without any decides them all.
        question = AccessQuestion("resources/read", uri, backend)
        self._conditioned(message, turn, decision, question)
        request = self._upstream(turn, "resources/read", backend, {"uri": own_uri}, own_uri)
        key = decision.rule or ""
        reply = await self._send(
            turn,
            decision,
            request,
            question,
            key=key,
            admitted=admitted,
            check="resource_result",
            missing=lambda: not_found(message.era),
        )
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
            question = AccessQuestion("prompts/get", completion.ref, backend)
            self._conditioned(message, turn, decision, question)
        check_expiry(turn, admitted)
        params: dict[str, Any] = {
            "ref": ref,
            "argument": {"name": completion.argument, "value": completion.value},
        }
        if completion.context:
            params["context"] = {"arguments": dict(completion.context)}
        request = self._upstream(turn, "completion/complete", backend, params)
        reply = await self._request(turn, request)
        return self._answer(message, turn, decision, reply, ttl_ms=None)
