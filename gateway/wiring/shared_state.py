"""What ``state:`` gives the gateway: this replica's limiters, or Redis's wrapped in the
``state.on_store_error`` fallbacks (the one place the limits and the store meet: neither layer
imports the other)."""

from __future__ import annotations

from collections.abc import Callable

from gateway.config import Config, StoreErrorPolicy
from gateway.limits.fallback import FallbackLeases, FallbackRateLimiter, SharedRateLimiter
from gateway.limits.memory import MemoryLeases, MemoryRateLimiter
from gateway.limits.redis import RedisLeases, RedisRateLimiter
from gateway.observability.metrics import Metrics
from gateway.seams import RateLimiter
from gateway.state.browser_records import RedisBrowserState
from gateway.state.dpop_replay import FallbackReplays, MemoryReplays, RedisReplays
from gateway.state.revocation import RevocationList
from gateway.state.shared import SharedState
from gateway.state.store import RedisStore
from gateway.state.token_cache import RedisTokenCache

__all__ = ["build_shared_state"]


def build_shared_state(
    config: Config, on_revoke: Callable[[bytes], None], metrics: Metrics | None = None
) -> SharedState:
    """What ``state:`` gives the gateway (:class:`~gateway.state.shared.SharedState`).

    ``on_revoke(digest)`` evicts a revoked token from every cache of this replica. With
    ``backend: memory`` everything is this replica's own; with ``backend: redis`` the Redis
    limiters and leases wrapped in the ``on_store_error`` fallbacks, the revocation list, the
    DPoP replay cache and (``share_token_cache``) the token cache shared through Redis.
    """
    state, ttl = config.state, float(config.admin.revocation_ttl_s)
    local = MemoryRateLimiter()
    if state.backend != "redis" or state.redis is None:
        revocations = RevocationList(ttl_s=ttl, on_revoke=on_revoke, metrics=metrics)
        return SharedState("memory", local, MemoryLeases(), revocations, MemoryReplays())
    store = RedisStore(state.redis, metrics=metrics)
    shared = RedisRateLimiter(store)
    policies = state.on_store_error

    def fallback(kind: str, policy: StoreErrorPolicy) -> RateLimiter:
        return FallbackRateLimiter(shared, local, kind=kind, policy=policy, metrics=metrics)

    limiter = SharedRateLimiter(
        {
            "ip": fallback("ip", policies.ip),
            "principal": fallback("principal", policies.principal),
            "tool": fallback("tool", policies.tool),
            "failed_auth": fallback("failed_auth", policies.failed_auth),
        },
        default=fallback("other", "local"),
    )
    leases = FallbackLeases(
        RedisLeases(store),
        MemoryLeases(),
        kind="tool_concurrency",
        policy=policies.tool_concurrency,
        metrics=metrics,
    )
    token_cache = RedisTokenCache(store, metrics=metrics) if state.share_token_cache else None
    revocations = RevocationList(
        ttl_s=ttl,
        on_revoke=on_revoke,
        store=store,
        policy=policies.revocation,
        token_cache_key=token_cache.entry_key if token_cache is not None else None,
        metrics=metrics,
    )
    replays = FallbackReplays(
        RedisReplays(store), MemoryReplays(), policy=policies.dpop_replay, metrics=metrics
    )
    return SharedState(
        "redis",
        limiter,
        leases,
        revocations,
        replays,
        store,
        token_cache,
        browser=RedisBrowserState(store),
    )
