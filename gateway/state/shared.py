"""What ``state:`` gives the rest of the gateway: its limiters and the store behind them.

:func:`build_shared_state` turns :class:`~gateway.config.StateConfig` into a
:class:`SharedState`: with ``backend: memory`` the in-process limiters (per replica), with
``backend: redis`` the Redis ones wrapped in the ``on_store_error`` fallbacks
(:mod:`gateway.limits.fallback`). The composition root (``gateway/wiring.py``) hands the
limiters to the front door and the authenticator and reports :meth:`SharedState.report` in
``/readyz``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.config import StateConfig
from gateway.limits.fallback import FallbackRateLimiter, SharedRateLimiter
from gateway.limits.memory import MemoryRateLimiter
from gateway.limits.redis import RedisRateLimiter
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.seams import RateLimiter
from gateway.state.store import RedisStore

__all__ = ["SharedState", "build_shared_state"]

_log = get_logger("gateway.state")


@dataclass(slots=True)
class SharedState:
    backend: str
    limiter: RateLimiter
    store: RedisStore | None = None

    def report(self) -> dict[str, Any]:
        """The ``state`` member of ``/readyz`` (informational: it never fails readiness)."""
        if self.store is None:
            return {"backend": self.backend}
        return {
            "backend": self.backend,
            "reachable": self.store.up,
            "error": self.store.last_error,
        }

    async def start(self) -> None:
        """Check Redis once at startup (logs the outcome; serving never waits for it)."""
        if self.store is not None and await self.store.ping():
            _log.info("state_store.connected", key_prefix=self.store.prefix)

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()


def build_shared_state(config: StateConfig, metrics: Metrics | None = None) -> SharedState:
    local = MemoryRateLimiter()
    if config.backend != "redis" or config.redis is None:
        return SharedState("memory", local)
    store = RedisStore(config.redis, metrics=metrics)
    shared = RedisRateLimiter(store)
    policies = config.on_store_error

    def fallback(kind: str, policy: Any) -> RateLimiter:
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
    return SharedState("redis", limiter, store)
