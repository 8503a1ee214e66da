"""The gateway's one error vocabulary: every rejection is one row of the status table.

Each concrete subclass of :class:`GatewayError` is exactly one row of the status table in
``docs/errors.md`` (mirrored from the design's ``architecture.md``). A class carries the row's
HTTP status, its JSON-RPC code (if the row has a JSON-RPC body), its RFC 6750 error code (if the
row has a Bearer challenge) and a short fixed message. Messages never echo input or secrets:
clients show them to users verbatim.

Rendering to HTTP happens in one place, :mod:`gateway.http.error_response`. This module is pure and
imports nothing from the gateway, so every layer may raise these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

__all__ = [
    "BAD_REQUEST_CODE",
    "EXCHANGE_REFUSALS",
    "FORBIDDEN_CODE",
    "GUARDRAIL_VERDICTS",
    "NOT_IMPLEMENTED_CODE",
    "RATE_LIMITED_CODE",
    "UNAUTHORIZED_CODE",
    "UNSUPPORTED_MEDIA_TYPE_CODE",
    "AmbiguousResourceUri",
    "ArgumentNotSettable",
    "BackendFailure",
    "BodyTooLarge",
    "ConditionArgumentsTooLarge",
    "ConditionDenied",
    "ConfigError",
    "DpopReplayUnavailable",
    "DpopRequired",
    "DpopTokenAsBearer",
    "Draining",
    "ExchangeRefused",
    "ExchangeUnavailable",
    "ExternalPolicyDenied",
    "GatewayError",
    "GuardrailDenied",
    "HeaderMismatch",
    "HeadersTooLarge",
    "InsufficientScope",
    "InternalError",
    "InvalidDpopProof",
    "InvalidParams",
    "InvalidPromptArguments",
    "InvalidRequest",
    "InvalidRequestState",
    "InvalidToken",
    "IssuerUnavailable",
    "JsonRpcId",
    "LegacyResourceNotFound",
    "LoginBadRequest",
    "LoginCsrfFailed",
    "LoginFailed",
    "LoginIdentityMismatch",
    "LoginIssuerMismatch",
    "LoginMethodNotAllowed",
    "LoginNotFound",
    "LoginPageError",
    "LoginStateInvalid",
    "LoginUnavailable",
    "MalformedRequest",
    "MethodNotAllowed",
    "MethodNotFound",
    "MissingClientCapability",
    "NoCredentials",
    "NotAcceptable",
    "OriginForbidden",
    "OverCapacity",
    "ParseError",
    "PolicyUnavailable",
    "RateLimited",
    "RequestTimeout",
    "ResourceNotFound",
    "RevocationUnavailable",
    "SessionNotFound",
    "SessionRequired",
    "StreamNotAcceptable",
    "TokenInQuery",
    "ToolInsufficientScope",
    "UnknownPrompt",
    "UnknownTask",
    "UnknownTool",
    "UnsupportedContentEncoding",
    "UnsupportedMediaType",
    "UnsupportedProtocolVersion",
    "UnsupportedTransferCoding",
    "UseDpopNonce",
    "all_rows",
]

UNAUTHORIZED_CODE = -31401
"""JSON-RPC code of the 401 bodies (``no_credentials``, ``invalid_token``)."""
FORBIDDEN_CODE = -31403
"""JSON-RPC code of the 403 scope bodies (``insufficient_scope``, ``tool_insufficient_scope``).

Both are application-defined: MCP 2026-07-28 basic/index.mdx §Error codes says new codes SHOULD
sit outside the JSON-RPC reserved range (-32768..-32000), implementations SHOULD NOT use the
legacy -32000..-32019 (the -32001 seen in the field is also the Python SDK's local
REQUEST_TIMEOUT), and MUST NOT emit undefined codes from -32020..-32099."""
BAD_REQUEST_CODE = -31400
"""JSON-RPC code of the fixed 400 bodies (``malformed_request``, ``token_in_query``)."""
UNSUPPORTED_MEDIA_TYPE_CODE = -31415
"""JSON-RPC code of the 415 bodies (``unsupported_media_type``,
``unsupported_content_encoding``)."""
NOT_IMPLEMENTED_CODE = -31501
"""JSON-RPC code of the 501 body (``unsupported_transfer_coding``)."""
RATE_LIMITED_CODE = -31429
"""JSON-RPC code of the 429 body (``rate_limited``).

The same scheme as the 401/403 codes: -31000 minus the HTTP status, outside the reserved range.
These rows answer with a JSON-RPC error body because SDK clients show a non-2xx body's message
only when it is one (else "Server returned an error response")."""
_MAX_LISTED_SCOPES = 8
"""Scopes named in a 401/403 message; the full lists are in ``data``."""

JsonRpcId = str | int
"""A JSON-RPC request id as admitted by the decoder: a string or a safe integer, never null."""

Era = Literal["modern", "legacy"]


class ConfigError(Exception):
    """A configuration or policy file is invalid; ``problems`` lists every finding."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class GatewayError(Exception):
    """Root of every client-visible rejection. Subclasses are status-table rows.

    Class attributes describe the row; instance attributes carry what varies per request
    (the JSON-RPC id to answer, the scopes to challenge with, a ``Retry-After`` value, the
    ``data`` member of a JSON-RPC error).
    """

    row: ClassVar[str] = ""
    """Stable row name, used by tests (``@pytest.mark.row``) and the ``docs/errors.md`` table."""
    status: ClassVar[int] = 500
    legacy_status: ClassVar[int | None] = None
    """HTTP status on the legacy (initialize-based) path, when it differs from ``status``."""
    jsonrpc_code: ClassVar[int | None] = None
    oauth_error: ClassVar[str | None] = None
    """RFC 6750 ``error=`` value; ``NoCredentials`` has a challenge without one (RFC 6750 §3.1)."""
    challenge: ClassVar[bool] = False
    """Whether the response carries ``WWW-Authenticate: Bearer ...``."""
    body_code: ClassVar[int | None] = None
    """JSON-RPC code of the body of an HTTP-level row that answers with a JSON-RPC error
    without being a JSON-RPC row (401/403: a 2025-03-26 batch is still refused as a whole)."""
    message: ClassVar[str] = "Internal error"
    batch_member_code: ClassVar[int | None] = None
    """For an HTTP-level row raised while one member of a 2025-03-26 batch runs (after earlier
    members may have run): that member's JSON-RPC error code, instead of answering the whole
    batch (whose other results would be lost)."""

    def __init__(
        self,
        *,
        request_id: JsonRpcId | None = None,
        scopes: tuple[str, ...] = (),
        retry_after: int | None = None,
        data: Mapping[str, Any] | None = None,
        detail: str = "",
        era: Era | None = None,
    ) -> None:
        super().__init__(detail or self.message)
        self.era = era
        """The protocol era the request was routed to, when known (picks the legacy status)."""
        self.request_id = request_id
        self.scopes = scopes
        self.retry_after = retry_after
        self.data = data
        self.detail = detail
        """For logs only; never rendered to the client."""

    def status_for(self, era: Era | None = None) -> int:
        era = era or self.era
        if era == "legacy" and self.legacy_status is not None:
            return self.legacy_status
        return self.status

    @property
    def wire_code(self) -> int | None:
        """The JSON-RPC code the rendered body carries, if it is a JSON-RPC error."""
        return self.jsonrpc_code if self.jsonrpc_code is not None else self.body_code

    def body_message(self) -> str:
        """The body's message: the fixed ``message`` unless the row names what is missing."""
        return self.message

    def body_data(self) -> Mapping[str, Any] | None:
        """The body's ``data`` member; only rows whose data the gateway builds have one."""
        return None


# --- HTTP admission ---------------------------------------------------------------------------


class MethodNotAllowed(GatewayError):
    row, status, message = "method_not_allowed", 405, ""


class OriginForbidden(GatewayError):
    row, status, message = "origin_forbidden", 403, ""


class NotAcceptable(GatewayError):
    row, status, message = "not_acceptable", 406, "Accept must allow application/json"


class UnsupportedMediaType(GatewayError):
    row, status, message = "unsupported_media_type", 415, "Content-Type must be application/json"
    body_code = UNSUPPORTED_MEDIA_TYPE_CODE


class UnsupportedContentEncoding(UnsupportedMediaType):
    """A request body with a content coding (``gzip``, ``deflate``, ...): never decompressed.

    RFC 9110 §15.5.16: 415 for an unacceptable content coding, with ``Accept-Encoding`` naming
    what is accepted (RFC 7694 §3). MCP clients do not compress requests; decoding them would
    only add a decompression-bomb surface in front of authentication.
    """

    row, message = "unsupported_content_encoding", "Request bodies must not be content-encoded"


class BodyTooLarge(GatewayError):
    row, status, message = "body_too_large", 413, "Request body too large"


class RequestTimeout(GatewayError):
    """The request body did not arrive before the end-to-end request deadline (RFC 9110 §15.5.9)."""

    row, status, message = "request_timeout", 408, "Request timed out"


class MalformedRequest(GatewayError):
    """The bytes are not a valid HTTP/1.1 request (bad request line, invalid header, obsolete line
    folding, bad chunk framing, conflicting framing headers). Answered by the listener before any
    handler runs; the connection is closed."""

    row, status, message = "malformed_request", 400, "Malformed HTTP request"
    body_code = BAD_REQUEST_CODE


class UnsupportedTransferCoding(GatewayError):
    """A request framed with a transfer coding other than a single ``chunked`` (``gzip,
    chunked``): RFC 9112 §6.1, a coding the server does not understand gets 501 (SHOULD). No
    coding but chunked is decoded, so the body could only be misread. Answered by the listener;
    the connection is closed."""

    row, status, message = (
        "unsupported_transfer_coding",
        501,
        "Transfer codings other than chunked are not supported",
    )
    body_code = NOT_IMPLEMENTED_CODE


class HeadersTooLarge(GatewayError):
    """The request head is over ``limits.max_header_bytes`` (or one line over 16 KiB): RFC 6585
    §5. The connection is closed."""

    row, status, message = "headers_too_large", 431, "Request headers too large"


class RateLimited(GatewayError):
    row, status, message = "rate_limited", 429, "Too many requests"
    body_code = RATE_LIMITED_CODE

    def body_message(self) -> str:
        if self.retry_after is None:
            return self.message
        return f"{self.message}, retry in {max(1, int(self.retry_after))} s"  # = Retry-After


class TooManySubscriptions(GatewayError):
    """``limits.max_subscriptions_per_principal`` streams or
    ``limits.max_subscribed_uris_per_principal`` URIs of this subject are already open on this
    replica. No ``Retry-After``: a slot frees when the client closes a stream, not after a time."""

    row, status, message = "too_many_subscriptions", 429, "Too many subscriptions"
    body_code = RATE_LIMITED_CODE


class SessionNotFound(GatewayError):
    """A legacy request names an ``Mcp-Session-Id`` this replica does not hold for this caller:
    never minted here, minted for another principal, malformed, or ended (2025-06-18
    basic/transports.mdx §Session Management 3: 404, the client starts a new session)."""

    row, status, message = "session_not_found", 404, "Session not found"
    legacy_status = 404
    body_code = -31404


class SessionRequired(GatewayError):
    """``resources/subscribe`` / ``resources/unsubscribe`` without ``Mcp-Session-Id``: a
    subscription lives in the session whose GET stream hears its updates (transports.mdx
    §Session Management 2: 400)."""

    row, status, message = "session_required", 400, "Mcp-Session-Id required"
    legacy_status = 400
    body_code = BAD_REQUEST_CODE


class StreamNotAcceptable(GatewayError):
    """A session's GET whose ``Accept`` does not list ``text/event-stream`` (transports.mdx
    §Listening for Messages from the Server 2)."""

    row, status, message = "stream_not_acceptable", 406, "Accept must allow text/event-stream"


class OverCapacity(GatewayError):
    row, status, message = "over_capacity", 503, "Server busy, retry later"


class Draining(GatewayError):
    """The replica is shutting down (SIGTERM) and this request cannot finish before the drain
    deadline: retry on another replica."""

    row, status, message = "draining", 503, "Server shutting down, retry later"


# --- OAuth resource server (RFC 6750 §3, RFC 9728 §5.1) ---------------------------------------


class TokenInQuery(GatewayError):
    row, status, message = "token_in_query", 400, "Access tokens are accepted only in the header"
    oauth_error = "invalid_request"
    challenge = True
    body_code = BAD_REQUEST_CODE


def _scope_list(scopes: tuple[str, ...]) -> str:
    named = " ".join(scopes[:_MAX_LISTED_SCOPES])
    return named + (" …" if len(scopes) > _MAX_LISTED_SCOPES else "")


class _AuthBody(GatewayError):
    """401/403 rows: a JSON-RPC error body naming the scopes (the Python SDK and FastMCP show
    a non-2xx body only when it is a JSON-RPC error). ``scopes`` are the policy's, never input."""

    challenge = True

    def body_data(self) -> Mapping[str, Any] | None:
        return {"required_scopes": list(self.scopes)}


class NoCredentials(_AuthBody):
    row, status, message = "no_credentials", 401, "Authentication required"
    body_code = UNAUTHORIZED_CODE

    def body_message(self) -> str:
        if not self.scopes:
            return self.message
        return f"{self.message}: send an OAuth access token with scope {_scope_list(self.scopes)}"


class InvalidToken(_AuthBody):
    row, status, message = "invalid_token", 401, "Invalid or expired access token"
    oauth_error = "invalid_token"
    body_code = UNAUTHORIZED_CODE


class InvalidDpopProof(InvalidToken):
    """The request's DPoP proof (RFC 9449 §4.3) is missing, repeated or fails a check; which
    one is ``reason`` (a bounded metrics label) and ``detail`` (logs), never the proof. The
    challenge is ``DPoP error="invalid_dpop_proof"`` (§7.1)."""

    row, message = "invalid_dpop_proof", "Invalid DPoP proof"
    oauth_error = "invalid_dpop_proof"

    def __init__(self, *, reason: str = "malformed", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason


class UseDpopNonce(InvalidDpopProof):
    """The issuer's ``dpop.nonce`` is on and the proof has no nonce, or an old or foreign one
    (RFC 9449 §8, §9): answered with a fresh ``DPoP-Nonce`` to sign into the retry."""

    row, message = "use_dpop_nonce", "DPoP nonce required"
    oauth_error = "use_dpop_nonce"

    def __init__(self, *, nonce: str = "", **kwargs: Any) -> None:
        kwargs.setdefault("reason", "nonce")
        super().__init__(**kwargs)
        self.nonce = nonce
        """The nonce the client must use (the ``DPoP-Nonce`` response header)."""


class DpopTokenAsBearer(InvalidToken):
    """A DPoP-bound token (``cnf.jkt``) presented with the ``Bearer`` scheme: refused, or a
    thief holding only the token would skip the proof (RFC 9449 §7.2 downgrade)."""

    row, message = "dpop_token_as_bearer", "This access token must be used with a DPoP proof"


class DpopRequired(InvalidToken):
    """A bearer (unbound) token of an issuer with ``dpop: required``."""

    row, message = "dpop_required", "A DPoP-bound access token is required"


class GroupsOverage(InvalidToken):
    """The issuer left the token's groups out (Entra ID group overage: ``_claim_names`` names
    the groups claim, or ``hasgroups: true``) while this issuer's ``groups`` feed the policy.
    Refused: reading "no groups" would decide on a partial identity."""

    row, message = "groups_overage", "The access token does not carry its groups (group overage)"


class InsufficientScope(_AuthBody):
    """The token lacks the baseline scopes every MCP request needs."""

    row, status, message = "insufficient_scope", 403, "Insufficient scope"
    oauth_error = "insufficient_scope"
    body_code = FORBIDDEN_CODE

    def __init__(self, *, missing: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.missing = missing
        """The scopes the token lacks (a subset of ``scopes``, which lists every one needed)."""

    def body_message(self) -> str:
        lacking = self.missing or self.scopes
        return f"Insufficient scope: requires {_scope_list(lacking)}" if lacking else self.message

    def body_data(self) -> Mapping[str, Any] | None:
        return {"required_scopes": list(self.scopes), "missing_scopes": list(self.missing)}


class ToolInsufficientScope(InsufficientScope):
    """The policy would allow this tool with more scopes (step-up, MCP 2025-11-25+ §Scope)."""

    row = "tool_insufficient_scope"


class ConditionDenied(GatewayError):
    """A ``when:`` condition of the tool's rule did not hold, or could not be evaluated.

    403 without a ``WWW-Authenticate`` challenge: more scopes would not help, so a client must
    not be sent into a step-up loop. The body names the rule key, never a claim value."""

    row, status, message = "condition_denied", 403, "Denied by a policy condition"
    body_code = FORBIDDEN_CODE

    def __init__(self, *, rule: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rule = rule

    def body_message(self) -> str:
        return f"Denied by a policy condition of rule {self.rule!r}"

    def body_data(self) -> Mapping[str, Any] | None:
        return {"rule": self.rule}


class ConditionArgumentsTooLarge(GatewayError):
    """The arguments a rule's ``when:`` conditions read are larger than they may be given.

    A condition's cost is bounded at load over arguments of at most a fixed size
    (docs/policy.md#cost); larger ones are refused before any condition runs, never evaluated
    (the library cannot stop an evaluation). -32602 like any invalid ``tools/call`` params;
    the body names the rule key, never a value."""

    row, status, jsonrpc_code = "condition_arguments_too_large", 400, -32602
    message = "Arguments too large for a policy condition"
    legacy_status = 200

    def __init__(self, *, rule: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rule = rule

    def body_message(self) -> str:
        return f"Arguments too large for the policy conditions of rule {self.rule!r}"

    def body_data(self) -> Mapping[str, Any] | None:
        return {"rule": self.rule}


class IssuerUnavailable(GatewayError):
    """The issuer could not answer; never an anonymous fallback (fail closed)."""

    row, status, message = (
        "issuer_unavailable",
        503,
        "Authorization server unavailable, retry later",
    )
    # RFC 6750 §3.1 has no "temporarily unavailable" code for resource servers; we send a
    # challenge without error= (like NoCredentials) and rely on 503 + Retry-After. See docs.
    challenge = True


class RevocationUnavailable(IssuerUnavailable):
    """The shared revocation list could not be checked for a token that is not cached, and
    ``state.on_store_error.revocation`` is ``deny`` (fail closed). Same answer as
    ``issuer_unavailable`` for the client; its own row for operators."""

    row = "revocation_unavailable"


class DpopReplayUnavailable(IssuerUnavailable):
    """The shared store could not say whether a DPoP proof was used before, and
    ``state.on_store_error.dpop_replay`` is ``deny`` (the default: fail closed)."""

    row = "dpop_replay_unavailable"


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


# --- JSON-RPC / MCP ---------------------------------------------------------------------------


class ParseError(GatewayError):
    row, status, jsonrpc_code, message = "parse_error", 400, -32700, "Parse error"


class InvalidRequest(GatewayError):
    row, status, jsonrpc_code, message = "invalid_request", 400, -32600, "Invalid Request"


class HeaderMismatch(GatewayError):
    row, status, jsonrpc_code, message = "header_mismatch", 400, -32020, "Header mismatch"


class InvalidParams(GatewayError):
    """Missing or malformed params (modern ``_meta`` keys, a bad cursor, bad initialize params)."""

    row, status, jsonrpc_code, message = "invalid_params", 400, -32602, "Invalid params"
    legacy_status = 200


class UnsupportedProtocolVersion(GatewayError):
    row, status, jsonrpc_code = "unsupported_version", 400, -32022
    message = "Unsupported protocol version"

    def body_data(self) -> Mapping[str, Any] | None:
        return (
            self.data
        )  # supported / requested, both validated (schema UnsupportedProtocolVersionError)


class MissingClientCapability(GatewayError):
    """The upstream needs a client capability the caller did not declare (2026-07-28 only).

    basic/index.mdx §Error codes: -32021 with ``data.requiredCapabilities``, HTTP 400 (MUST). The
    data is rebuilt by the backend from known capability keys only; the upstream's message is not.
    """

    row, status, jsonrpc_code = "missing_client_capability", 400, -32021
    message = "Missing required client capability"

    def body_message(self) -> str:
        required = (self.data or {}).get("requiredCapabilities")
        names = sorted(required) if isinstance(required, Mapping) else []
        return f"{self.message}: {', '.join(names)}" if names else self.message

    def body_data(self) -> Mapping[str, Any] | None:
        return self.data


StateRefusal = Literal[
    "invalid",
    "expired",
    "mismatch",
    "responses_missing",
    "state_missing",
    "responses_invalid",
    "responses_too_large",
]


class InvalidRequestState(GatewayError):
    """A 2026-07-28 ``tools/call`` retry whose ``requestState`` or ``inputResponses`` is refused.

    basic/patterns/mrtr.mdx §Server Requirements: ``requestState`` is attacker-controlled and
    state that fails verification MUST be rejected. One row, one fixed message per ``reason``
    (docs/errors.md); which binding failed goes to ``detail`` (logs) only. Nothing is sent
    upstream for any of them.
    """

    row, status, jsonrpc_code = "invalid_request_state", 400, -32602
    message = "Invalid requestState"
    MESSAGES: ClassVar[Mapping[str, str]] = {
        "invalid": "Invalid requestState",
        "expired": "Expired requestState: call the tool again without it",
        "mismatch": "requestState does not match this request",
        "responses_missing": "inputResponses are required with this requestState",
        "state_missing": "inputResponses need the requestState they answer",
        "responses_invalid": "Invalid inputResponses",
        "responses_too_large": "inputResponses too large",
    }

    def __init__(self, reason: StateRefusal, *, detail: str = "", **kwargs: Any) -> None:
        super().__init__(detail=detail or reason, **kwargs)
        self.reason: StateRefusal = reason

    def body_message(self) -> str:
        return self.MESSAGES[self.reason]


class MethodNotFound(GatewayError):
    # Modern: 404 is a MUST (streamable-http.mdx). Legacy: 200, because rmcp and others treat a
    # 404 as an expired session and re-initialize (digest §6 item 10).
    row, status, jsonrpc_code, message = "method_not_found", 404, -32601, "Method not found"
    legacy_status = 200


class UnknownTool(GatewayError):
    """A tool that does not exist, or that the caller may not see (no existence leak)."""

    row, status, jsonrpc_code, message = "unknown_tool", 400, -32602, "Unknown tool"
    legacy_status = 200


class UnknownTask(GatewayError):
    """A task request (``tasks/get``, ``tasks/update``, ``tasks/cancel``) the gateway answers as
    for a task that does not exist: a handle it did not mint, tampered with, expired, another
    caller's (subject, client, issuer), of a backend no longer configured or a tool the policy
    no longer lets the caller call as a task, or a task its backend does not know.

    SEP-2663 §Error Handling: an invalid or nonexistent ``taskId`` is -32602. One fixed answer
    for every case, so a caller learns nothing about another's tasks; why goes to the audit
    trail only. Nothing is sent upstream for any of them (but the last)."""

    row, status, jsonrpc_code, message = "unknown_task", 400, -32602, "Task not found"


class ArgumentNotSettable(GatewayError):
    """``tools/call`` sets an argument the policy's ``override:`` fixes or hides.

    The caller cannot set it (docs/policy.md#overrides): refused before anything goes
    upstream, never silently replaced. -32602 like any invalid ``tools/call`` params. The
    message and ``data.arguments`` name the arguments, from the policy only (each is a policy
    name the request also used, never a value)."""

    row, status, jsonrpc_code = "argument_not_settable", 400, -32602
    message = "Arguments set by the gateway cannot be set by the caller"
    legacy_status = 200

    def __init__(self, *, arguments: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.arguments = arguments

    def body_message(self) -> str:
        return f"{self.message}: {', '.join(self.arguments)}"

    def body_data(self) -> Mapping[str, Any] | None:
        return {"arguments": list(self.arguments)}


class UnknownPrompt(GatewayError):
    """A prompt that does not exist, or that the caller may not see (no existence leak)."""

    row, status, jsonrpc_code, message = "unknown_prompt", 400, -32602, "Unknown prompt"
    legacy_status = 200


class ResourceNotFound(GatewayError):
    """2026-07-28: a resource that does not exist or that the caller may not see. The modern
    revision answers -32602 (server/resources.mdx §Error Handling; -32002 is retired)."""

    row, status, jsonrpc_code, message = "resource_not_found", 400, -32602, "Resource not found"


class AmbiguousResourceUri(GatewayError):
    """A resource URI with no one normal form (an encoded ``/`` or ``\\``, a backslash, an empty
    path segment, a dot segment above the root, a control character): a server that decodes or
    collapses it could read another resource than the one the policy decided on. Refused in both
    eras with -32602 before any rule is looked at (it depends on the URI's bytes only)."""

    row, status, jsonrpc_code = "ambiguous_resource_uri", 400, -32602
    message = "Ambiguous resource URI"
    legacy_status = 200


class LegacyResourceNotFound(GatewayError):
    """2025 revisions: the same answer with the code they define, -32002 (resources.mdx)."""

    row, status, jsonrpc_code = "legacy_resource_not_found", 200, -32002
    message = "Resource not found"


class InvalidPromptArguments(GatewayError):
    """``prompts/get`` arguments that do not match what the prompt declares."""

    row, status, jsonrpc_code = "invalid_prompt_arguments", 400, -32602
    message = "Invalid prompt arguments"
    legacy_status = 200


class BackendFailure(GatewayError):
    """Transport-level upstream fault outside a tool result (e.g. tools/list upstream failure)."""

    row, status, jsonrpc_code, message = "backend_failure", 502, -32603, "Upstream server error"
    legacy_status = 200


class InternalError(GatewayError):
    row, status, jsonrpc_code, message = "internal_error", 500, -32603, "Internal error"


# --- the browser login surface's pages (gateway/login; rendered as HTML, docs/errors.md) ------


class LoginPageError(GatewayError):
    """A refusal on a page of the browser login surface. Rendered as an HTML page (fixed text,
    the surface's security headers) by ``gateway/login``, never as JSON-RPC; nothing of the
    request (a code, a state, a cookie) is echoed."""

    page_title: ClassVar[str] = "Sign-in"


class LoginBadRequest(LoginPageError):
    """A page request the surface cannot read: a form over the size bound or not URL-encoded,
    an authorization response without ``code`` or ``state``, a return path off the surface."""

    row, status, message = "login_bad_request", 400, "The request could not be read."


class LoginCsrfFailed(LoginPageError):
    """A form posted without the session's synchronizer token, with another one, from another
    origin, or without a signed-in session: nothing is done."""

    row, status = "login_csrf_failed", 403
    message = "The form could not be accepted: reload the page and try again."


class LoginStateInvalid(LoginPageError):
    """An answer to a sign-in this browser did not start, or not now: no sign-in cookie (or a
    tampered or expired one), a ``state`` that is not this browser's, or one already used."""

    row, status = "login_state_invalid", 400
    message = "This sign-in was not started here or has already been used: sign in again."


class LoginIssuerMismatch(LoginPageError):
    """RFC 9207 §2.4: the authorization response's ``iss`` is not the issuer the browser was
    sent to, or is missing while that issuer advertises it (a mix-up attack); the code is not
    redeemed."""

    row, status = "login_issuer_mismatch", 400
    message = "The sign-in answer came from another issuer: sign in again."


class LoginFailed(LoginPageError):
    """The sign-in did not prove who is in the browser: the issuer answered an error (the
    person declined), refused the code (another client's, replayed, expired), or its ID token
    (or the verifier's assertion) failed validation."""

    row, status, message = "login_failed", 403, "Sign-in failed."


class LoginIdentityMismatch(LoginPageError):
    """A pending action (a link an MCP client opened) belongs to another person than the one
    signed in: nothing happens to it, and the attempt is audited."""

    row, status = "login_identity_mismatch", 403
    message = "This link was started by another user. Sign out, then sign in as that user."


class LoginNotFound(LoginPageError):
    """No such page under the surface's prefix, or a pending-action link that is unknown,
    expired or already used (the same answer for each)."""

    row, status, message = "login_not_found", 404, "This page or link does not exist (any more)."


class LoginMethodNotAllowed(LoginPageError):
    """A method the page does not take (``Allow`` names those it does)."""

    row, status, message = "login_method_not_allowed", 405, "Method not allowed."


class LoginUnavailable(LoginPageError):
    """The issuer (its metadata, key set or token endpoint), the external verifier or the shared
    store could not answer: fail closed, retry later."""

    row, status = "login_unavailable", 503
    message = "Sign-in is unavailable right now; try again in a moment."


def all_rows() -> list[type[GatewayError]]:
    """Every concrete row class, recursively (used by the status-table test)."""
    found: list[type[GatewayError]] = []
    stack: list[type[GatewayError]] = [GatewayError]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            stack.append(sub)
            if sub.row:
                found.append(sub)
    return sorted(found, key=lambda c: c.row)
