"""What ``state:`` gives the rest of the gateway: limiters, leases, revocations, shared cache,
the DPoP replay cache.

:func:`build_shared_state` turns the configuration into a :class:`SharedState`. With
``backend: memory`` everything is this replica's own: in-process limiters and leases, a local
revocation list (``POST /admin/revoke`` still works, on this replica). With ``backend: redis``
the Redis limiters and leases wrapped in the ``on_store_error`` fallbacks
(:mod:`gateway.limits.fallback`), the revocation list shared through Redis (markers + pub/sub),
the DPoP proofs seen by any replica (:mod:`.dpop_replay`) and, with ``share_token_cache``, the
shared introspection cache. The composition root
(``gateway/wiring.py``) hands these to the front door and the authenticator, runs
:meth:`SharedState.run` in the background and reports :meth:`SharedState.report` in ``/readyz``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gateway.config import Config, StoreErrorPolicy
from gateway.limits.fallback import FallbackLeases, FallbackRateLimiter, SharedRateLimiter
from gateway.limits.memory import MemoryLeases, MemoryRateLimiter
from gateway.limits.redis import RedisLeases, RedisRateLimiter
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.seams import ConcurrencyLimiter, DpopReplays, RateLimiter
from gateway.state.dpop_replay import FallbackReplays, MemoryReplays, RedisReplays
from gateway.state.revocation import RevocationList
from gateway.state.store import RedisStore
from gateway.state.token_cache import RedisTokenCache

__all__ = ["SharedState", "build_shared_state"]

_log = get_logger("gateway.state")


@dataclass(slots=True)
class SharedState:
    backend: str
    limiter: RateLimiter
    leases: ConcurrencyLimiter
    revocations: RevocationList
    dpop_replays: DpopReplays
    store: RedisStore | None = None
    token_cache: RedisTokenCache | None = None

    def report(self) -> dict[str, Any]:
        """The ``state`` member of ``/readyz`` (informational: it never fails readiness)."""
        report: dict[str, Any] = {"backend": self.backend}
        if self.store is not None:
            report["reachable"] = self.store.up
            report["error"] = self.store.last_error
            report["shared_token_cache"] = self.token_cache is not None
        report["revocations"] = len(self.revocations)
        return report

    async def run(self) -> None:
        """Check Redis once, then apply every replica's revocations until cancelled."""
        if self.store is None:
            return
        if await self.store.ping():
            _log.info("state_store.connected", key_prefix=self.store.prefix)
        await self.revocations.run()

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()


def build_shared_state(
    config: Config, on_revoke: Callable[[bytes], None], metrics: Metrics | None = None
) -> SharedState:
    """``on_revoke(digest)`` evicts a revoked token from every cache of this replica."""
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
    return SharedState("redis", limiter, leases, revocations, replays, store, token_cache)
