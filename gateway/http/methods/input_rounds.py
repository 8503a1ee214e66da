"""Input rounds at the front door: open a retry's sealed state, seal the next round's.

MCP 2026-07-28 basic/patterns/mrtr.mdx. The dispatcher calls :meth:`InputRounds.resume` for a
``tools/call`` that carries ``requestState`` or ``inputResponses``, after the policy, the limits
and the expiry re-check passed (so a retry is authorized like any call, by the policy in force
now), and before anything goes upstream. It checks, in order, with one ``invalid_request_state``
row (400 -32602) and a fixed message per failure:

1. ``inputResponses`` without ``requestState`` (``state_missing``);
2. ``inputResponses`` over ``input_requests.max_input_response_bytes`` (``responses_too_large``);
3. the envelope opens under a configured key (``invalid``);
4. not expired (``expired``); the same subject, issuer, client id, tool, arguments and owning
   backend as the round it answers (``mismatch``; the backend checks its own name again);
5. ``inputResponses`` present when the round asked for input (``responses_missing``); each
   answer has the result shape of what was asked (``responses_invalid``; unasked keys dropped).

:meth:`InputRounds.relay` turns a backend's :class:`~gateway.seams.InputRequired` into the
client's ``InputRequiredResult``: without ``input_requests`` configured every round is the fixed
tool error :data:`~gateway.protocol.input_required.DISABLED_TEXT`; a legacy-era client gets
the fixed tool error
(:data:`~gateway.protocol.input_required.LEGACY_CLIENT_TEXT`); a request kind the client did not
declare is ``missing_client_capability`` (-32021); past ``max_rounds`` or the seal's size bound
it is a tool error; otherwise the round is sealed afresh (new nonce, new expiry, round + 1).

Each round leaves ``ctx.extra["input"]`` for the audit event (kinds and round numbers, never the
contents) and counts in ``mcp_gateway_input_rounds_total{event}``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from gateway.config import Config
from gateway.errors import InvalidRequestState, MissingClientCapability
from gateway.http.turn import Turn
from gateway.jsonkit.write import canonical
from gateway.observability.metrics import Metrics
from gateway.protocol.capabilities import known_capabilities
from gateway.protocol.input_required import (
    DISABLED_TEXT,
    LEGACY_CLIENT_TEXT,
    SEAL_FAILED_TEXT,
    TOO_MANY_ROUNDS_TEXT,
    check_input_responses,
    required_capabilities,
)
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import input_required_result, shape_call_result, tool_error_result
from gateway.protocol.sealed_state import (
    Binding,
    Claims,
    Sealer,
    SealError,
    arguments_digest,
    check_bindings,
)
from gateway.seams import InputRequired, Principal, RequestContext, Resume

__all__ = ["APPROVAL_KEY", "CONSENT_KEY", "INPUT_KEY", "InputRounds"]

INPUT_KEY: Final = "input"
"""``RequestContext.extra`` key of the round record the audit event carries."""
CONSENT_KEY: Final = "mcp-gateway/connect"
"""The ``inputRequests`` key of the gateway's own consent round (``user_oauth`` backends)."""
APPROVAL_KEY: Final = "mcp-gateway/approve"
"""The ``inputRequests`` key of the gateway's own approval round (``approval:`` rules)."""


class InputRounds:
    """Sealing and opening input rounds under ``input_requests`` (one per dispatcher)."""

    def __init__(
        self,
        config: Config,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        settings = config.input_requests
        self._settings = settings
        self._server = config.server
        self._metrics = metrics
        self._clock = clock
        self._sealer = (
            Sealer(
                settings.seal_keys,
                settings.seal_key_id,
                resource=config.resource,
                max_state_bytes=settings.max_state_bytes,
                max_text_chars=config.limits.json.max_string_bytes,
            )
            if settings.enabled
            else None
        )

    def resume(
        self,
        message: McpMessage,
        principal: Principal,
        policy_version: str,
        ctx: RequestContext,
        *,
        backend: str = "",
    ) -> Resume | None:
        """The checked retry of a modern ``tools/call``, None for a first call; raises the
        ``invalid_request_state`` row (nothing has gone upstream)."""
        state, responses = message.request_state, message.input_responses
        if state is None and responses is None:
            return None
        try:
            if state is None:
                raise InvalidRequestState("state_missing")
            if responses is not None and _size(responses) > self._settings.max_input_response_bytes:
                raise InvalidRequestState("responses_too_large")
            if self._sealer is None:
                raise InvalidRequestState("invalid", detail="input_requests is not enabled")
            claims = self._sealer.open(state)
            check_bindings(claims, _binding(principal, message, backend), self._clock())
            if claims.requests and responses is None:
                raise InvalidRequestState("responses_missing")
            kept = check_input_responses(responses or {}, claims.requests)
        except InvalidRequestState as refused:
            ctx.extra[INPUT_KEY] = {"refused": refused.reason}
            self._count("rejected")
            raise
        ctx.extra[INPUT_KEY] = {
            "answers_round": claims.round,
            "answered": sorted({claims.requests[key] for key in kept}),
            "policy_changed": claims.policy_version != policy_version,
        }
        self._count("resumed")
        return Resume(
            backend=claims.backend,
            state=claims.state,
            responses=kept if claims.requests else None,
            round=claims.round,
            kinds={key: claims.requests[key] for key in kept},
            consent=claims.consent,
            approval=claims.approval,
        )

    def relay(
        self,
        found: InputRequired,
        message: McpMessage,
        *,
        principal: Principal,
        policy_version: str,
        resume: Resume | None,
        ctx: RequestContext,
    ) -> dict[str, Any]:
        """The result to send for an upstream input round (shaped for the client's era)."""
        kinds = {key: request["method"] for key, request in found.requests.items()}
        record: dict[str, Any] = dict(ctx.extra.get(INPUT_KEY) or {})
        round_ = 1 if resume is None else resume.round + 1
        record.update(round=round_, requested=sorted(set(kinds.values())))
        ctx.extra[INPUT_KEY] = record
        if self._sealer is None:
            return self._refuse(message, ctx, DISABLED_TEXT, "disabled")
        if message.era != "modern":
            # A legacy client cannot retry with inputResponses: never a half-relayed request.
            return self._refuse(message, ctx, LEGACY_CLIENT_TEXT, "legacy_client")
        declared = known_capabilities(message.client_capabilities)
        missing = required_capabilities(found.requests, declared)
        if missing:
            ctx.outcome = "input_refused"
            self._count("missing_capability")
            raise MissingClientCapability(data={"requiredCapabilities": missing})
        if round_ > self._settings.max_rounds:
            return self._refuse(message, ctx, TOO_MANY_ROUNDS_TEXT, "too_many_rounds")
        bound = _binding(principal, message, found.backend)
        sealed = self._seal(bound, policy_version, round_, kinds, state=found.state)
        if sealed is None:
            return self._refuse(message, ctx, SEAL_FAILED_TEXT, "too_large")
        ctx.outcome = "input_required"
        self._count("relayed")
        if self._metrics is not None:
            for kind in kinds.values():
                self._metrics.input_requests_total.labels(kind=kind).inc()
        return input_required_result(found.requests, sealed, server=self._server)

    def consent_round(
        self,
        message: McpMessage,
        turn: Turn,
        *,
        url: str,
        text: str,
        backend: str,
        after: Resume | None,
        approval: str | None = None,
    ) -> dict[str, Any] | None:
        """The gateway's own round: a URL elicitation (``url``, with ``text``) to a consent
        link, or with ``approval`` the id of an approval record, to its page; under
        :data:`CONSENT_KEY` (or :data:`APPROVAL_KEY`), with a sealed state bound like every
        round's (caller, tool, arguments, backend), marked as the gateway's. None when it cannot
        be sealed (no ``input_requests``, or past ``max_rounds``): the caller gets the tool error
        instead."""
        ctx, principal, policy_version = turn.ctx, turn.principal, turn.policy.version
        request: dict[str, Any] = {
            "method": "elicitation/create",
            "params": {"mode": "url", "url": url, "message": text},
        }
        round_ = 1 if after is None else after.round + 1
        key = CONSENT_KEY if approval is None else APPROVAL_KEY
        ctx.extra[INPUT_KEY] = {
            "round": round_,
            "requested": ["elicitation/create"],
            **({"consent": backend} if approval is None else {"approval": True}),
        }
        if self._sealer is None or round_ > self._settings.max_rounds:
            return None
        bound = _binding(principal, message, backend)
        requests = {key: request["method"]}
        sealed = self._seal(
            bound,
            policy_version,
            round_,
            requests,
            consent=approval is None,
            approval=approval,
        )
        if sealed is None:
            return None
        ctx.outcome = "consent_required" if approval is None else "approval_required"
        return input_required_result({key: request}, sealed, server=self._server)

    def _seal(
        self,
        bound: Binding,
        policy_version: str,
        round_: int,
        requests: Mapping[str, str],
        *,
        state: str | None = None,
        consent: bool = False,
        approval: str | None = None,
    ) -> str | None:
        """A round's sealed state, bound like its retry will be; None when it cannot be sealed
        (too large)."""
        assert self._sealer is not None  # the callers refuse the round without one
        now = int(self._clock())
        claims = Claims(
            **dataclasses.asdict(bound),  # a state carries what its retry must match
            policy_version=policy_version,
            issued_at=now,
            expires_at=now + self._settings.ttl_s,
            round=round_,
            requests=requests,
            state=state,
            consent=consent,
            approval=approval,
        )
        try:
            return self._sealer.seal(claims)
        except SealError:
            return None

    def _refuse(
        self, message: McpMessage, ctx: RequestContext, text: str, event: str
    ) -> dict[str, Any]:
        ctx.outcome = "input_refused"
        self._count(event)
        return shape_call_result(tool_error_result(text), era=message.era, server=self._server)

    def _count(self, event: str) -> None:
        if self._metrics is not None:
            self._metrics.input_rounds_total.labels(event=event).inc()


def _binding(principal: Principal, message: McpMessage, backend: str) -> Binding:
    """What a round's state is bound to: the caller, the tool, its arguments, the backend."""
    return Binding(
        subject=principal.subject,
        issuer=principal.issuer,
        client_id=principal.client_id,
        tool=message.tool_name or "",
        arguments=arguments_digest(message.arguments),
        backend=backend,
    )


def _size(value: Mapping[str, Any]) -> int:
    """Canonical JSON bytes, the measure of ``max_input_response_bytes``."""
    return len(canonical(value))  # sorted or not, the same length
