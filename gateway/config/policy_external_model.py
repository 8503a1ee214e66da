"""``policy_external:``, typed: the external decision point (OpenID AuthZEN 1.0) and the
gateway's credential there. Built by :mod:`gateway.config.policy_external`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from gateway.config.secrets import Secret

__all__ = ["PDP_FIXED_PROPERTIES", "PDP_METHODS", "PdpCredential", "PolicyExternalConfig"]

PDP_METHODS: Final = ("tools/call", "prompts/get", "resources/read")
"""The methods the decision point can be asked about (``policy_external.methods``)."""


PDP_FIXED_PROPERTIES: Final = ("issuer", "client_id", "scopes", "auth_method", "actor")
"""``subject.properties`` the gateway always sends (when known); ``subject_properties`` may not
reuse these names."""


@dataclass(frozen=True, slots=True)
class PdpCredential:
    """``policy_external.credential``: the gateway's own credential at the decision point."""

    type: Literal["bearer", "basic"]
    token: Secret | None = None
    """``bearer``: sent as ``Authorization: Bearer``."""
    username: str | None = None
    password: Secret | None = None
    """``basic``: RFC 7617 ``Authorization: Basic``."""


@dataclass(frozen=True, slots=True)
class PolicyExternalConfig:
    """``policy_external:``: an OpenID AuthZEN 1.0 Access Evaluation endpoint consulted after the
    local policy allows (docs/policy.md#external-decision-point). It can only narrow."""

    url: str
    """The full Access Evaluation URL (``https://pdp.internal/access/v1/evaluation``)."""
    credential: PdpCredential | None = None
    timeout_s: float = 1.0
    """Per decision, further capped by what is left of the request's deadline."""
    on_error: Literal["deny", "allow_local"] = "deny"
    retry_after_s: int = 5
    subject_type: str = "user"
    subject_properties: tuple[tuple[str, str], ...] = ()
    """(property name, claim name) pairs: the validated token's claims sent as
    ``subject.properties`` (absent claims are left out), besides the fixed ones."""
    send_arguments: bool = False
    """Send a ``tools/call``'s arguments (and a ``prompts/get``'s) as
    ``resource.properties.arguments``; they are then part of the cache key."""
    cache_ttl_s: float = 30.0
    """How long a decision (allow or deny) is reused; 0 turns the cache off."""
    cache_max_entries: int = 10_000
    max_connections: int = 64
    methods: frozenset[str] = frozenset(PDP_METHODS)
    tools: tuple[str, ...] | None = None
    """Tool-name patterns (the policy's ``*`` / ``?``) whose ``tools/call`` is asked about;
    None: every tool."""
    """Which of the three the decision point is asked about (the others: the local policy only)."""
