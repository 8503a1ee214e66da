"""``state:`` and ``admin:``, typed and declared: where the state shared by every replica lives,
and the ops listener's admin API. Built by :mod:`gateway.config.state`."""

from dataclasses import dataclass, field
from typing import Annotated, Final, Literal

from gateway.config.backend_model import TlsConfig
from gateway.config.declare import Key
from gateway.config.secrets import SecretRef

__all__ = [
    "DEFAULT_REDIS_TIMEOUT_MS",
    "AdminConfig",
    "RedisConfig",
    "StateConfig",
    "StoreErrorPolicies",
    "StoreErrorPolicy",
]

StoreErrorPolicy = Literal["local", "deny"]
"""What a decision that needs the shared store does when the store cannot answer in time."""


@dataclass(frozen=True, slots=True)
class StoreErrorPolicies:
    """``state.on_store_error``: one policy per kind of shared decision (docs/operations.md)."""

    ip: StoreErrorPolicy = "local"
    principal: StoreErrorPolicy = "local"
    tool: StoreErrorPolicy = "local"
    tool_concurrency: StoreErrorPolicy = "local"
    failed_auth: StoreErrorPolicy = "local"
    revocation: StoreErrorPolicy = "local"
    dpop_replay: StoreErrorPolicy = "deny"
    """A DPoP proof's ``jti`` Redis could not check: ``deny`` (503) by default, since ``local``
    lets a proof replayed at another replica through while Redis is down."""


DEFAULT_REDIS_TIMEOUT_MS: Final = 250
"""``state.redis.timeout_ms``. 100 ms tripped the 1 s back-off on a loaded host: 64 callers on a
shared 2-core machine saw Redis calls of 86-145 ms at the 99.9th percentile (docs/operations.md),
and under ``on_store_error: deny`` (the DPoP replay check's default) each trip refused every
call for a second."""


@dataclass(frozen=True, slots=True)
class RedisConfig:
    """``state.redis``: the Redis server (a single primary or a managed endpoint)."""

    url: Annotated[SecretRef, Key(required=True)]
    """``redis://``, ``rediss://`` (TLS) or ``unix://``; may carry the password, hence a secret."""
    key_prefix: Annotated[
        str,
        Key(
            pattern="^[A-Za-z0-9:_.-]{0,64}$",
            message="may hold only letters, digits, ':', '_', '.' and '-' (at most 64)",
        ),
    ] = "mcp-gateway:"
    timeout_ms: Annotated[int, Key(minimum=1, maximum=10_000)] = DEFAULT_REDIS_TIMEOUT_MS
    tls: TlsConfig = field(default_factory=TlsConfig)


@dataclass(frozen=True, slots=True)
class StateConfig:
    """``state:``: where replica-shared state lives (``memory`` = this replica only)."""

    backend: Literal["memory", "redis"] = "memory"
    redis: RedisConfig | None = None
    share_token_cache: bool = False
    on_store_error: StoreErrorPolicies = field(default_factory=StoreErrorPolicies)


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """``admin:``: the ops listener's admin API (``POST /admin/revoke``) and revocation."""

    token: SecretRef | None = None
    """The admin credential; without it there is no admin endpoint."""
    revocation_ttl_s: Annotated[int, Key(minimum=1, maximum=2_592_000)] = 3600
    """How long a token revoked at the gateway stays refused at least (>= the cache's longest
    hold); a JWT stays refused until its ``exp`` when that is later."""
