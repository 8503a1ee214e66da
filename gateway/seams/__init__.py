"""The seams between layers: shared value objects and the Protocols each layer implements.

Only :mod:`gateway.wiring` (the composition root) wires concrete classes to these Protocols;
every other module depends on the Protocol. This package imports nothing from the gateway except
:mod:`gateway.errors`, so every layer may import it without breaking the layer rules
(``tests/test_layers.py``).
"""

from __future__ import annotations

from gateway.seams.backends import (
    ANNOTATION_HINTS,
    TOOL_NAME,
    Backend,
    Catalog,
    Era,
    HeaderParam,
    InputRequired,
    JsonObject,
    Resume,
    ToolCall,
    ToolDef,
    ToolOverride,
)
from gateway.seams.callers import (
    AUTH_METHODS,
    NO_CLAIMS,
    Authenticator,
    AuthMethod,
    AuthRequest,
    CachedPrincipal,
    CallerToken,
    DpopReplays,
    Principal,
    PrincipalMemo,
    Revocations,
    SharedTokenCache,
    frozen_claims,
)
from gateway.seams.listening import (
    ListenEvent,
    ListenFilter,
    Listening,
    ListenOffer,
    ListenRefused,
    UpstreamListen,
)
from gateway.seams.policy import (
    AccessQuestion,
    Decision,
    DecisionPoint,
    Listing,
    Policy,
    PolicySource,
    listed,
)
from gateway.seams.requests import (
    CallRecord,
    ConcurrencyLimiter,
    Lease,
    Observer,
    RateLimiter,
    RequestContext,
    sorted_tools,
)
from gateway.seams.surface import (
    EMPTY_SURFACE,
    GATEWAY_SCHEME,
    PromptDef,
    ResourceDef,
    Surface,
    SurfaceReply,
    SurfaceRequest,
)

__all__ = [
    "ANNOTATION_HINTS",
    "AUTH_METHODS",
    "EMPTY_SURFACE",
    "GATEWAY_SCHEME",
    "NO_CLAIMS",
    "TOOL_NAME",
    "AccessQuestion",
    "AuthMethod",
    "AuthRequest",
    "Authenticator",
    "Backend",
    "CachedPrincipal",
    "CallRecord",
    "CallerToken",
    "Catalog",
    "ConcurrencyLimiter",
    "Decision",
    "DecisionPoint",
    "DpopReplays",
    "Era",
    "HeaderParam",
    "InputRequired",
    "JsonObject",
    "Lease",
    "ListenEvent",
    "ListenFilter",
    "ListenOffer",
    "ListenRefused",
    "Listening",
    "Listing",
    "Observer",
    "Policy",
    "PolicySource",
    "Principal",
    "PrincipalMemo",
    "PromptDef",
    "RateLimiter",
    "RequestContext",
    "ResourceDef",
    "Resume",
    "Revocations",
    "SharedTokenCache",
    "Surface",
    "SurfaceReply",
    "SurfaceRequest",
    "ToolCall",
    "ToolDef",
    "ToolOverride",
    "UpstreamListen",
    "frozen_claims",
    "listed",
    "sorted_tools",
]
