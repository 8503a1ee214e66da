"""Refusals by what decides beyond the token: the policy's ``when:`` conditions, the token
exchange for a backend (RFC 8693), the external decision point (OpenID AuthZEN 1.0) and the
guardrails."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.errors._base import FORBIDDEN_CODE, GatewayError

__all__ = [
    "EXCHANGE_REFUSALS",
    "GUARDRAIL_VERDICTS",
    "ConditionArgumentsTooLarge",
    "ConditionDenied",
    "ExchangeRefused",
    "ExchangeUnavailable",
    "ExternalPolicyDenied",
    "GuardrailDenied",
    "PolicyUnavailable",
    "UpstreamConnectionRequired",
    "UpstreamTokenUnavailable",
]


class _NamesRule(GatewayError):
    """A row whose body names the policy rule that refused (its key, never a value)."""

    def __init__(self, *, rule: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rule = rule

    def body_data(self) -> Mapping[str, Any] | None:
        return {"rule": self.rule}


class ConditionDenied(_NamesRule):
    """A ``when:`` condition of the tool's rule did not hold, or could not be evaluated.

    403 without a ``WWW-Authenticate`` challenge: more scopes would not help, so a client must
    not be sent into a step-up loop. The body names the rule key, never a claim value."""

    row, status, message = "condition_denied", 403, "Denied by a policy condition"
    body_code = FORBIDDEN_CODE

    def body_message(self) -> str:
        return f"Denied by a policy condition of rule {self.rule!r}"


class ConditionArgumentsTooLarge(_NamesRule):
    """The arguments a rule's ``when:`` conditions read are larger than they may be given.

    A condition's cost is bounded at load over arguments of at most a fixed size
    (docs/policy.md#cost); larger ones are refused before any condition runs, never evaluated
    (the library cannot stop an evaluation). -32602 like any invalid ``tools/call`` params;
    the body names the rule key, never a value."""

    row, status, jsonrpc_code = "condition_arguments_too_large", 400, -32602
    message = "Arguments too large for a policy condition"
    legacy_status = 200

    def body_message(self) -> str:
        return f"Arguments too large for the policy conditions of rule {self.rule!r}"


# --- backend identity (RFC 8693 token exchange) ----------------------------------------------

EXCHANGE_REFUSALS = (
    "invalid_grant",
    "unauthorized_client",
    "invalid_target",
    "access_denied",
    "invalid_scope",
    "issuer_not_accepted",
)
"""``data.reason`` of ``exchange_refused``: the issuer's RFC 6749 §5.2 / RFC 8693 §2.2.2 error
code, or ``issuer_not_accepted`` (the backend exchanges only another issuer's tokens)."""


class ExchangeRefused(GatewayError):
    """The issuer refused to exchange the caller's token for a token for the tool's backend
    (RFC 8693 §2.2.2): this caller may not reach that backend. Never a fallback to the service
    credential or the caller's own token. No challenge: more scopes from this issuer would not
    help the client (the refusal is about the backend, not the gateway's resource)."""

    row, status, message = (
        "exchange_refused",
        403,
        "The authorization server refused this caller access to the tool's backend",
    )
    body_code = batch_member_code = FORBIDDEN_CODE

    def body_data(self) -> Mapping[str, Any] | None:
        reason = (self.data or {}).get("reason")
        return {"reason": reason if reason in EXCHANGE_REFUSALS else "access_denied"}


class ExchangeUnavailable(GatewayError):
    """The token exchange for the tool's backend could not be done: the issuer's token endpoint
    is unreachable, slow, or answered something that is not a token (or refused the gateway's
    own client authentication). Fail closed, retry later."""

    row, status, message = (
        "exchange_unavailable",
        503,
        "Authorization server unavailable for this tool's backend, retry later",
    )
    batch_member_code = -32603


# --- the external decision point (policy_external: OpenID AuthZEN 1.0) -----------------------


class ExternalPolicyDenied(GatewayError):
    """The external decision point answered ``"decision": false`` for a request the local
    policy allows (AuthZEN 1.0 §6.2). It can only narrow: no challenge, since more scopes would
    not change its answer, and none of its ``context`` (reasons meant for administrators) is
    relayed: the text is fixed."""

    row, status, message = (
        "external_policy_denied",
        403,
        "Denied by the organisation's policy decision point",
    )
    body_code = batch_member_code = FORBIDDEN_CODE

    def body_data(self) -> Mapping[str, Any] | None:
        return {"reason": "external_policy"}


class PolicyUnavailable(GatewayError):
    """The external decision point could not decide: unreachable, slower than
    ``policy_external.timeout_s`` (within the request deadline), or an answer that is not an
    AuthZEN decision. Fail closed (``on_error: deny``, the default), retry later."""

    row, status, message = (
        "policy_unavailable",
        503,
        "Policy decision point unavailable, retry later",
    )
    batch_member_code = -32603


# --- guardrails (named content processors a policy rule selects) ------------------------------

GUARDRAIL_VERDICTS = ("deny", "unavailable", "invalid")
"""``data.verdict`` of ``guardrail_denied``: the processor refused the content; it could not
answer (``on_error: deny``); it answered a change the gateway refused (not valid for the
method, or wider than the policy allows)."""


class GuardrailDenied(GatewayError):
    """A guardrail the rule names refused the content, could not answer (under ``on_error:
    deny``, the default), or changed it in a way the gateway refuses (docs/policy.md#guardrails).
    No challenge: more scopes would not change a processor's verdict. The body names the
    processor; ``data.reason`` is the processor's own reason (meant for the client, bounded,
    control characters removed), present only when it gave one."""

    row, status, message = "guardrail_denied", 403, "Denied by a guardrail"
    body_code = batch_member_code = FORBIDDEN_CODE

    def __init__(
        self, *, guardrail: str, verdict: str, reason: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.guardrail = guardrail
        self.verdict = verdict if verdict in GUARDRAIL_VERDICTS else "deny"
        self.reason = reason

    def body_message(self) -> str:
        return f"Denied by guardrail {self.guardrail!r}"

    def body_data(self) -> Mapping[str, Any] | None:
        data: dict[str, Any] = {"guardrail": self.guardrail, "verdict": self.verdict}
        if self.reason:
            data["reason"] = self.reason
        return data


# --- per-user upstream authorization (user_oauth backends) ---------------------------------


class UpstreamTokenUnavailable(GatewayError):
    """A ``user_oauth`` backend's call needs the caller's upstream token, and it could not be
    had right now: the shared store (Redis) did not answer, or its access token lapsed and the
    upstream's authorization server could not refresh it (down, slow, garbled). Fail closed
    (never another person's token, never the catalog's), retry later."""

    row, status, message = (
        "upstream_token_unavailable",
        503,
        "Your account at this tool's service cannot be used right now, retry later",
    )
    batch_member_code = -32603


class UpstreamConnectionRequired(GatewayError):
    """A request other than ``tools/call`` (``prompts/get``, ``resources/read``,
    ``completion/complete``, a task request) needs the caller's account at a ``user_oauth``
    backend, which is not connected, from a client that cannot be sent a link (no URL
    elicitation): ``data`` names the backend and the account page where the person connects it.
    (A ``tools/call`` gets a tool error saying the same, which the model can read.)"""

    row, status, message = (
        "upstream_connection_required",
        403,
        "Connect your account for this backend at the gateway's account page, then retry",
    )
    body_code = batch_member_code = FORBIDDEN_CODE

    def body_data(self) -> Mapping[str, Any] | None:
        return self.data
