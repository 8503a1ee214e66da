"""``policy_external:``, typed: the external decision point (OpenID AuthZEN 1.0) and the
gateway's credential there. Built by :mod:`gateway.config.policy_external`."""

from dataclasses import dataclass
from typing import Annotated, Final, Literal, get_args

from gateway.config.declare import Key
from gateway.config.secrets import SecretRef

__all__ = [
    "PDP_FIXED_PROPERTIES",
    "PDP_METHODS",
    "PdpCredential",
    "PdpMethod",
    "PolicyExternalConfig",
]

PdpMethod = Literal["tools/call", "prompts/get", "resources/read"]
PDP_METHODS: Final[tuple[PdpMethod, ...]] = get_args(PdpMethod)
"""The methods the decision point can be asked about (``policy_external.methods``)."""


PDP_FIXED_PROPERTIES: Final = ("issuer", "client_id", "scopes", "auth_method", "actor")
"""``subject.properties`` the gateway always sends (when known); ``subject_properties`` may not
reuse these names."""


@dataclass(frozen=True, slots=True)
class PdpCredential:
    """``policy_external.credential``: the gateway's own credential at the decision point."""

    type: Literal["bearer", "basic"]
    token: Annotated[SecretRef | None, Key(forms=("bearer",), required=("bearer",))] = None
    """``bearer``: sent as ``Authorization: Bearer``."""
    username: Annotated[
        str | None,
        Key(
            forms=("basic",),
            required=("basic",),
            min_length=1,
            max_length=256,
            pattern="^[^:]+$",
            message="must be a non-empty user name without ':' (RFC 7617)",
        ),
    ] = None
    password: Annotated[SecretRef | None, Key(forms=("basic",), required=("basic",))] = None
    """``basic``: RFC 7617 ``Authorization: Basic``."""


@dataclass(frozen=True, slots=True)
class PolicyExternalConfig:
    """``policy_external:``: an OpenID AuthZEN 1.0 Access Evaluation endpoint consulted after the
    local policy allows (docs/policy.md#external-decision-point). It can only narrow."""

    url: Annotated[str, Key(required=True, min_length=1)]
    """The full Access Evaluation URL (``https://pdp.internal/access/v1/evaluation``)."""
    allow_insecure_http: bool = False
    credential: Annotated[
        PdpCredential | None,
        Key(
            message="must be {type: bearer, token: <secret>} or {type: basic, username: ..., "
            "password: <secret>}"
        ),
    ] = None
    timeout_s: Annotated[float, Key(exclusive_minimum=0, maximum=30)] = 1.0
    """Per decision, further capped by what is left of the request's deadline."""
    on_error: Literal["deny", "allow_local"] = "deny"
    retry_after_s: Annotated[int, Key(minimum=1, maximum=3600)] = 5
    subject_type: Annotated[str, Key(min_length=1, max_length=64)] = "user"
    subject_properties: Annotated[
        tuple[tuple[str, str], ...],
        Key(
            max_properties=32,
            names=Key(pattern="^[A-Za-z0-9_.:-]{1,64}$"),
            items=Key(min_length=1, max_length=256),
        ),
    ] = ()
    """(property name, claim name) pairs: the validated token's claims sent as
    ``subject.properties`` (absent claims are left out), besides the fixed ones."""
    send_arguments: bool = False
    """Send a ``tools/call``'s arguments (and a ``prompts/get``'s) as
    ``resource.properties.arguments``; they are then part of the cache key."""
    cache_ttl_s: Annotated[float, Key(yaml="cache.ttl_s", minimum=0, maximum=3600)] = 30.0
    """How long a decision (allow or deny) is reused; 0 turns the cache off."""
    cache_max_entries: Annotated[
        int, Key(yaml="cache.max_entries", minimum=1, maximum=1_000_000)
    ] = 10_000
    max_connections: Annotated[int, Key(minimum=1, maximum=1000)] = 64
    methods: Annotated[frozenset[PdpMethod], Key(min_items=1, unique_items=True)] = frozenset(
        PDP_METHODS
    )
    """Which of the three the decision point is asked about (the others: the local policy only)."""
    tools: Annotated[
        tuple[str, ...] | None,
        Key(
            min_items=1,
            max_items=256,
            items=Key(
                min_length=1,
                max_length=256,
                pattern="^[^\\[\\]]+$",
                message="must be a tool name or pattern with * and ? (no [ or ])",
            ),
        ),
    ] = None
    """Tool-name patterns (the policy's ``*`` / ``?``) whose ``tools/call`` is asked about;
    None: every tool."""
