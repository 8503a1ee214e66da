"""The gateway's one error vocabulary: every rejection is one row of the status table.

Each concrete subclass of :class:`GatewayError` is exactly one row of the status table in
``docs/errors.md`` (mirrored from the design's ``architecture.md``). A class carries the row's
HTTP status, its JSON-RPC code (if the row has a JSON-RPC body), its RFC 6750 error code (if the
row has a Bearer challenge) and a short fixed message. Messages never echo input or secrets:
clients show them to users verbatim.

Rendering to HTTP happens in one place, :mod:`gateway.http.error_response` (the login surface's
pages: :mod:`gateway.login.pages`). This package is pure and imports nothing else from the
gateway, so every layer may raise these. It is imported as ``gateway.errors`` only; its private
modules are the families of rows: _base.py (the root and the codes), _transport.py (HTTP
admission), _oauth.py (the resource server), _denials.py (conditions, token exchange, decision
point, guardrails, a person's upstream token), _approvals.py (human approval), _mcp.py
(JSON-RPC), _login_pages.py (the login surface and its connect pages).
"""

from __future__ import annotations

from gateway.errors._approvals import (
    APPROVAL_REFUSALS,
    ApprovalClosed,
    ApprovalForbidden,
    ApprovalRefused,
    ApprovalRequired,
    ApprovalUnavailable,
)
from gateway.errors._base import (
    BAD_REQUEST_CODE,
    FORBIDDEN_CODE,
    NOT_IMPLEMENTED_CODE,
    RATE_LIMITED_CODE,
    UNAUTHORIZED_CODE,
    UNSUPPORTED_MEDIA_TYPE_CODE,
    ConfigError,
    GatewayError,
    JsonRpcId,
)
from gateway.errors._denials import (
    EXCHANGE_REFUSALS,
    GUARDRAIL_VERDICTS,
    ConditionArgumentsTooLarge,
    ConditionDenied,
    ExchangeRefused,
    ExchangeUnavailable,
    ExternalPolicyDenied,
    GuardrailDenied,
    PolicyUnavailable,
    UpstreamConnectionRequired,
    UpstreamTokenUnavailable,
)
from gateway.errors._login_pages import (
    ConnectFailed,
    ConnectIssuerMismatch,
    ConnectStateInvalid,
    ConnectUnavailable,
    LoginBadRequest,
    LoginCsrfFailed,
    LoginFailed,
    LoginIdentityMismatch,
    LoginIssuerMismatch,
    LoginMethodNotAllowed,
    LoginNotFound,
    LoginPageError,
    LoginRateLimited,
    LoginStateInvalid,
    LoginUnavailable,
)
from gateway.errors._mcp import (
    AmbiguousResourceUri,
    ArgumentNotSettable,
    BackendFailure,
    HeaderMismatch,
    InternalError,
    InvalidParams,
    InvalidPromptArguments,
    InvalidRequest,
    InvalidRequestState,
    LegacyResourceNotFound,
    MethodNotFound,
    MissingClientCapability,
    ParseError,
    ResourceNotFound,
    UnknownPrompt,
    UnknownTask,
    UnknownTool,
    UnsupportedProtocolVersion,
    UrlElicitationRequired,
)
from gateway.errors._oauth import (
    DpopReplayUnavailable,
    DpopRequired,
    DpopTokenAsBearer,
    GroupsOverage,
    InsufficientScope,
    InvalidDpopProof,
    InvalidToken,
    IssuerUnavailable,
    NoCredentials,
    RevocationUnavailable,
    TokenInQuery,
    ToolInsufficientScope,
    UseDpopNonce,
)
from gateway.errors._transport import (
    BodyTooLarge,
    Draining,
    HeadersTooLarge,
    MalformedRequest,
    MethodNotAllowed,
    NotAcceptable,
    OriginForbidden,
    OverCapacity,
    RateLimited,
    RequestTimeout,
    SessionNotFound,
    SessionRequired,
    StreamNotAcceptable,
    TooManySubscriptions,
    UnsupportedContentEncoding,
    UnsupportedMediaType,
    UnsupportedTransferCoding,
)

__all__ = [
    "APPROVAL_REFUSALS",
    "BAD_REQUEST_CODE",
    "EXCHANGE_REFUSALS",
    "FORBIDDEN_CODE",
    "GUARDRAIL_VERDICTS",
    "NOT_IMPLEMENTED_CODE",
    "RATE_LIMITED_CODE",
    "UNAUTHORIZED_CODE",
    "UNSUPPORTED_MEDIA_TYPE_CODE",
    "AmbiguousResourceUri",
    "ApprovalClosed",
    "ApprovalForbidden",
    "ApprovalRefused",
    "ApprovalRequired",
    "ApprovalUnavailable",
    "ArgumentNotSettable",
    "BackendFailure",
    "BodyTooLarge",
    "ConditionArgumentsTooLarge",
    "ConditionDenied",
    "ConfigError",
    "ConnectFailed",
    "ConnectIssuerMismatch",
    "ConnectStateInvalid",
    "ConnectUnavailable",
    "DpopReplayUnavailable",
    "DpopRequired",
    "DpopTokenAsBearer",
    "Draining",
    "ExchangeRefused",
    "ExchangeUnavailable",
    "ExternalPolicyDenied",
    "GatewayError",
    "GroupsOverage",
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
    "LoginRateLimited",
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
    "TooManySubscriptions",
    "ToolInsufficientScope",
    "UnknownPrompt",
    "UnknownTask",
    "UnknownTool",
    "UnsupportedContentEncoding",
    "UnsupportedMediaType",
    "UnsupportedProtocolVersion",
    "UnsupportedTransferCoding",
    "UpstreamConnectionRequired",
    "UpstreamTokenUnavailable",
    "UrlElicitationRequired",
    "UseDpopNonce",
    "all_rows",
]


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
