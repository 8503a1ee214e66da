"""The bounded label vocabularies of the gateway's metrics: every value a label may take.

A collector in :mod:`gateway.observability.metrics` labels a series only with a value from one
of these tuples (its series are created at zero up front), with :func:`method_label` for a
JSON-RPC method, or with a name bounded elsewhere (a configured backend, a catalog's tool, a
policy rule). ``docs/operations.md`` lists them per metric.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from gateway.seams import SURFACE_METHODS

__all__ = [
    "APPROVAL_EVENTS",
    "ASSERTION_RESULTS",
    "BACKEND_OUTCOMES",
    "CATALOG_REFRESH_RESULTS",
    "CATALOG_SANITISED_KINDS",
    "DECISIONS",
    "DPOP_REFUSALS",
    "EXCHANGE_RESULTS",
    "GUARDRAIL_FAILURES",
    "GUARDRAIL_VERDICTS",
    "INPUT_KINDS",
    "INPUT_ROUND_EVENTS",
    "INTROSPECTION_RESULTS",
    "ISSUER_ERROR_RESULTS",
    "JWKS_FETCH_RESULTS",
    "JWT_RESULTS",
    "LOGIN_EVENTS",
    "METHOD_LABELS",
    "PDP_OUTCOMES",
    "POLICY_RELOAD_RESULTS",
    "RATE_LIMIT_SCOPES",
    "STORE_ERROR_KINDS",
    "TASK_EVENTS",
    "TOKEN_CACHE_OUTCOMES",
    "TRACE_DROP_REASONS",
    "BackendOutcome",
    "method_label",
]

TRACE_DROP_REASONS: Final = ("queue_full", "export_failed")

METHOD_LABELS: Final = (
    "server/discover",
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    *SURFACE_METHODS,
    "subscriptions/listen",
    "resources/subscribe",
    "resources/unsubscribe",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "notifications",
    "other",
)
"""``method`` label values. Every ``notifications/*`` is ``notifications``; anything else, and a
request refused before its body was decoded (401, 405, 413, ...), is ``other``."""

DECISIONS: Final = ("allow", "deny", "none")
"""``decision`` label values: the policy's verdict, or ``none`` when no policy decision was made."""

INTROSPECTION_RESULTS: Final = (
    "active",
    "inactive",
    "rejected",
    "timeout",
    "refused",
    "redirect",
    "oversized",
    "client_auth_rejected",
    "http_error",
    "content_type",
    "malformed",
)
"""``introspection_total{result}`` (set by ``gateway/auth``): the issuer answered ``active``,
``inactive``, or active with claims the gateway refuses (``rejected``: audience, issuer, expiry,
type); every other value is an *issuer error* (no usable answer), what the IssuerErrors alert
watches."""

ISSUER_ERROR_RESULTS: Final = INTROSPECTION_RESULTS[3:]
"""The ``result`` values that mean the issuer could not be used (503 ``issuer_unavailable``)."""

JWT_RESULTS: Final = ("valid", "refused", "no_keys")
"""``jwt_validations_total{result}``: local JWT validations (signature and claims); ``no_keys``:
the issuer had no usable JWK Set (503)."""
JWKS_FETCH_RESULTS: Final = ("success", "failure")
DPOP_REFUSALS: Final = (
    "missing",
    "multiple",
    "malformed",
    "typ",
    "alg",
    "jwk",
    "signature",
    "htm",
    "htu",
    "iat",
    "jti",
    "ath",
    "jkt",
    "replay",
    "nonce",
    "unbound",
    "as_bearer",
    "required",
)
"""``dpop_refusals_total{reason}``: why a request was refused for DPoP (RFC 9449): a proof
check (``missing`` ... ``replay``), ``nonce`` (answered ``use_dpop_nonce``), an unbound token
under the ``DPoP`` scheme, a bound token presented as ``Bearer`` (``as_bearer``), a bearer token
where the issuer has ``dpop: required``."""

TOKEN_CACHE_OUTCOMES: Final = ("hit", "miss", "coalesced", "stale", "shared")
"""``token_cache_total{outcome}``: ``coalesced`` joined an in-flight introspection
(single-flight); ``stale`` served a cached result past its TTL because the issuer failed;
``shared`` found another replica's result in the shared cache (``state.share_token_cache``)."""

BackendOutcome = Literal[
    "ok",
    "tool_error",
    "invalid_arguments",
    "timeout",
    "upstream_error",
    "too_large",
    "cancelled",
    "input_required",
    "exchange_failed",
    "task",
    "consent_required",
]
"""``backend_requests_total{outcome}`` (set by ``gateway/backend``); ``cancelled``: the client
went away mid-call; ``too_large``: the upstream reply exceeded its cap; ``input_required``: the
upstream asked for input (2026-07-28 input round; what the gateway did with it is
``input_rounds_total``); ``exchange_failed``: the token exchange was refused or failed, so the
call never went upstream; ``task``: the upstream answered with a task (``tasks_total``);
``consent_required``: a ``user_oauth`` backend has no usable token of the caller (or its
upstream refused it), so the caller is asked to connect."""
BACKEND_OUTCOMES: Final[tuple[str, ...]] = get_args(BackendOutcome)
TASK_EVENTS: Final = ("created", "completed", "failed", "cancelled")
"""``tasks_total{backend,event}`` (``gateway/http/methods/task_*``): a task relayed to its
creator, and the terminal status a request about it saw first (on this replica)."""

APPROVAL_EVENTS: Final = ("requested", "approved", "denied", "expired", "executed")
"""``approvals_total{event}`` (``gateway/approvals``): a record created, decided, found
expired, and its approved call run."""

INPUT_ROUND_EVENTS: Final = (
    "relayed",
    "resumed",
    "rejected",
    "missing_capability",
    "legacy_client",
    "too_many_rounds",
    "too_large",
    "disabled",
)
"""``input_rounds_total{event}`` (``gateway/http/methods/input_rounds.py``): an upstream input round
sealed and ``relayed`` to the client, or refused (``missing_capability``: -32021,
``legacy_client``, ``too_many_rounds``, ``too_large``, ``disabled``: the fixed tool errors); a
retry ``resumed`` (its state opened and checked) or ``rejected`` (the ``invalid_request_state``
row)."""
INPUT_KINDS: Final = ("elicitation/create", "roots/list", "sampling/createMessage")
"""``input_requests_total{kind}``: the input requests relayed, by kind."""
ASSERTION_RESULTS: Final = ("signed", "reused")
"""``identity_assertions_total{result}``: a caller assertion minted, or one reused."""
EXCHANGE_RESULTS: Final = ("ok", "refused", "unavailable")
"""``token_exchanges_total{result}``: RFC 8693 requests to the token endpoint."""
GUARDRAIL_VERDICTS: Final = ("pass", "mutate", "deny", "invalid", "error")
"""``guardrail_verdicts_total{verdict}``: a processor let the content pass, changed it (the
change was valid), refused it, answered a change the gateway refused (``invalid``), or could
not answer (``error``: see ``guardrail_errors_total``)."""
GUARDRAIL_FAILURES: Final = (
    "timeout",
    "unreachable",
    "status",
    "malformed",
    "too_large",
    "credential",
)
"""``guardrail_errors_total{reason}``: why a processor gave no verdict (its deadline ran out;
no connection; a status other than 200; an answer that is not a verdict; the message or the
answer over ``max_body_bytes``; the gateway's own credential could not be had)."""
PDP_OUTCOMES: Final = ("allow", "deny", "error", "cache_hit")
"""``policy_external_decisions_total{outcome}``: the external decision point's answers (allow,
deny), the consultations it could not answer (error: unreachable, slow, garbled) and the ones
answered from the decision cache (cache_hit)."""

RATE_LIMIT_SCOPES: Final = (
    "ip",
    "failed_auth",
    "principal",
    "tool",
    "tool_concurrency",
    "ip_concurrency",
    "principal_concurrency",
    "ip_connections",
    "prompt",
    "prompt_concurrency",
    "task",
    "resource",
    "resource_concurrency",
    "login",
)
"""``rate_limited_total{scope}``: pre-auth per client IP (``limits.pre_auth_rate``; ``login``:
the login surface's pages and the connect API, ``login.pre_auth_rate``), failed
authentications per client IP (``issuer.failed_auth_rate``), per subject
(``limits.principal_rate``), per subject and tool (the policy's ``rate_limit``: ``tool``;
``max_concurrency``: ``tool_concurrency``), the in-flight shares per client IP and per subject
(``limits.max_in_flight_per_ip`` / ``_per_principal``) and open connections per TCP peer
(``limits.max_connections_per_ip``); ``prompt`` / ``resource`` (and ``_concurrency``): a
``prompts:`` or ``resources:`` rule's limits. Every 429 of the MCP pipeline, whatever its
source, is also counted in ``rejections_total{row="rate_limited"}``."""

STORE_ERROR_KINDS: Final = (
    "ip",
    "failed_auth",
    "principal",
    "tool",
    "tool_concurrency",
    "revocation",
    "token_cache",
    "dpop_replay",
    "other",
)
"""``state_store_errors_total{kind}``: decisions that needed Redis and did not get an answer in
time, so they followed ``state.on_store_error.<kind>`` (the limit kinds and ``revocation``) or
introspected themselves (``token_cache``); ``other``: a limiter key of no known kind, decided
locally."""

LOGIN_EVENTS: Final = (
    "signed_in",
    "refused",
    "signed_out",
    "action_started",
    "action_redeemed",
    "identity_mismatch",
)
"""``login_events_total{event}`` (the browser login surface, ``gateway/login``): sign-ins that
proved who is in the browser, page refusals (each also ``rejections_total{row="login_*"}``),
sign-outs, pending actions started by MCP requests and redeemed at a page, and pending actions
a page refused because another person is signed in."""
UPSTREAM_CONSENT_EVENTS: Final = ("started", "completed", "failed")
"""``upstream_consents_total{event}`` (``user_oauth`` backends): consent links handed out,
connections stored, and connections that failed (declined, refused, a mix-up, a wrong person)."""
UPSTREAM_REFRESH_RESULTS: Final = ("ok", "refused", "unavailable")
"""``upstream_refreshes_total{result}``: people's upstream tokens refreshed, refused by the
server (``invalid_grant``: the person connects again), or not refreshed (server down)."""
POLICY_RELOAD_RESULTS: Final = ("success", "failure")
CATALOG_REFRESH_RESULTS: Final = ("success", "failure")
CATALOG_SANITISED_KINDS: Final = ("invisible", "truncated", "name_refused")
"""``catalog_sanitised_total{kind}`` (description hygiene, ``gateway/backend/catalog/hygiene.py``):
hidden characters removed from an item's title or description, a text cut at
``limits.max_description_chars``, an item hidden because its name has hidden characters."""

_METHOD_LABEL: Final = {m: m for m in METHOD_LABELS if m not in {"notifications", "other"}}


def method_label(method: str | None) -> str:
    """The bounded ``method`` label for a JSON-RPC method name (see :data:`METHOD_LABELS`)."""
    if method is None:
        return "other"
    label = _METHOD_LABEL.get(method)
    if label is not None:
        return label
    return "notifications" if method.startswith("notifications/") else "other"
