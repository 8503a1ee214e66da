"""What ``state:`` gives the rest of the gateway: limiters, leases, revocations, shared cache,
the DPoP replay cache.

:func:`gateway.wiring.shared_state.build_shared_state` (the composition root: it puts the limiters
of :mod:`gateway.limits` together with the store, so this layer never imports that one) turns the
configuration into a :class:`SharedState`. With ``backend: memory`` everything is this replica's
own: in-process limiters and leases, a local revocation list (``POST /admin/revoke`` still works, on
this replica). With ``backend: redis`` the Redis limiters and leases wrapped in the
``on_store_error`` fallbacks (:mod:`gateway.limits.fallback`), the revocation list shared through
Redis (markers + pub/sub), the DPoP proofs seen by any replica (:mod:`.dpop_replay`), the login
surface's pending actions and marks (:mod:`.browser_records`) and, with ``share_token_cache``,
the shared introspection cache. The composition root (``gateway/wiring/``) hands these to the
front door and the authenticator, runs :meth:`SharedState.run` in the background and reports
:meth:`SharedState.report` in ``/readyz``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.observability.logging import get_logger
from gateway.seams import ConcurrencyLimiter, DpopReplays, RateLimiter
from gateway.state.browser_records import BrowserState, MemoryBrowserState
from gateway.state.revocation import RevocationList
from gateway.state.store import RedisStore
from gateway.state.token_cache import RedisTokenCache

__all__ = ["SharedState"]

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
    browser: BrowserState = field(default_factory=MemoryBrowserState)
    """The login surface's pending actions and marks (:mod:`gateway.state.browser_records`)."""
    settled: bool = False
    """The startup contact with Redis is over (answered, or tried for its whole window): the
    ``state_store`` readiness check. Never false again: a later outage follows
    ``state.on_store_error``."""

    def report(self) -> dict[str, Any]:
        """The ``state`` member of ``/readyz`` (informational: readiness waits only for the
        startup contact, :attr:`settled`)."""
        report: dict[str, Any] = {"backend": self.backend}
        if self.store is not None:
            report["reachable"] = self.store.up
            report["error"] = self.store.last_error
            report["shared_token_cache"] = self.token_cache is not None
        report["revocations"] = len(self.revocations)
        return report

    async def run(self) -> None:
        """Reach Redis (the replica is not ready before: :meth:`RedisStore.connect`), then
        apply every replica's revocations until cancelled."""
        if self.store is None:
            self.settled = True
            return
        if await self.store.connect():
            _log.info("state_store.connected", key_prefix=self.store.prefix)
        self.settled = True
        await self.revocations.run()

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()
