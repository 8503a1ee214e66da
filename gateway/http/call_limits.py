"""The request's rate budgets and the per-tool concurrency leases (429 ``rate_limited``).

One :class:`CallLimits` per endpoint: the pre-auth and per-principal rates of steps 4 and 9, and
for ``tools/call`` the policy's per-subject ``rate_limit`` and ``max_concurrency`` of a tool, for
one call or for every call of a 2025-03-26 batch at once. Per-subject keys name the issuer too
(:func:`~gateway.limits.keys.principal_key`). Counted in
``rate_limited_total{scope}``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Final

from gateway.errors import RateLimited
from gateway.http.turn import BACKEND_GRACE_S, Turn
from gateway.limits.keys import principal_key
from gateway.limits.memory import MemoryLeases, retry_after_seconds
from gateway.observability.metrics import Metrics
from gateway.seams import ConcurrencyLimiter, Lease, RateLimiter

__all__ = ["CONCURRENCY_RETRY_S", "LEASE_MARGIN_S", "CallLimits", "release_leases"]

CONCURRENCY_RETRY_S: Final = 1
LEASE_MARGIN_S: Final = 1.0
"""A concurrency lease outlives its call's deadline and grace by this much."""


class CallLimits:
    """Rate budgets and concurrency leases, shared by every request of an endpoint."""

    def __init__(
        self,
        *,
        limiter: RateLimiter,
        leases: ConcurrencyLimiter | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._limiter = limiter
        self._leases: ConcurrencyLimiter = leases if leases is not None else MemoryLeases()
        self._metrics = metrics

    async def enforce_rate(self, key: str, count: int, per_s: float, scope: str) -> None:
        """One event against ``key``'s budget; past it, count ``scope`` and raise 429."""
        wait = await self._limiter.hit(key, count, per_s)
        if wait is not None:
            self.count_limited(scope)
            raise RateLimited(retry_after=retry_after_seconds(wait))

    def count_limited(self, scope: str) -> None:
        if self._metrics is not None:
            self._metrics.rate_limited_total.labels(scope=scope).inc()

    async def admit_call(self, turn: Turn, name: str) -> Lease | None:
        """The tool's rate limit, then its concurrency cap; the lease (if capped) to release."""
        key = f"tool:{principal_key(turn.principal)}:{name}"
        rate = turn.policy.rate_limit(name)
        if rate is not None:
            await self.enforce_rate(key, rate[0], rate[1], "tool")
        limit = turn.policy.max_concurrency(name)
        if limit is None:
            return None
        lease = await self._leases.acquire(key, limit, _hold_s(turn))
        if lease is None:
            self.count_limited("tool_concurrency")
            raise RateLimited(retry_after=CONCURRENCY_RETRY_S)
        return lease

    async def admit_rule(
        self,
        turn: Turn,
        key: str,
        rate: tuple[int, float] | None,
        concurrency: int | None,
        scope: str,
    ) -> Lease | None:
        """A prompt's or resource rule's limits (``scope``: ``prompt`` / ``resource``), as for a
        tool: the rate under ``scope``, the cap under ``<scope>_concurrency``."""
        if rate is not None:
            await self.enforce_rate(key, rate[0], rate[1], scope)
        if concurrency is None:
            return None
        lease = await self._leases.acquire(key, concurrency, _hold_s(turn))
        if lease is None:
            self.count_limited(f"{scope}_concurrency")
            raise RateLimited(retry_after=CONCURRENCY_RETRY_S)
        return lease

    async def admit_calls(self, turn: Turn, names: Iterable[str]) -> list[Lease]:
        """A batch's calls: every call's rate first, then one lease per distinct capped tool.

        Members run one after another, so one lease per tool covers all of its calls; on a
        refusal the leases already taken are released before the 429 is raised.
        """
        names = list(names)
        policy, subject = turn.policy, principal_key(turn.principal)
        for name in names:
            rate = policy.rate_limit(name)
            if rate is not None:
                await self.enforce_rate(f"tool:{subject}:{name}", rate[0], rate[1], "tool")
        held: list[Lease] = []
        for name in dict.fromkeys(names):
            limit = policy.max_concurrency(name)
            if limit is None:
                continue
            lease = await self._leases.acquire(f"tool:{subject}:{name}", limit, _hold_s(turn))
            if lease is None:
                await release_leases(held)
                self.count_limited("tool_concurrency")
                raise RateLimited(retry_after=CONCURRENCY_RETRY_S)
            held.append(lease)
        return held


async def release_leases(leases: Iterable[Lease]) -> None:
    for lease in leases:
        await lease.release()


def _hold_s(turn: Turn) -> float:
    # Held at most until the call's deadline (plus grace): a replica that dies mid-call
    # cannot keep a shared slot (state.backend: redis) longer than that.
    return turn.deadline + BACKEND_GRACE_S + LEASE_MARGIN_S - time.monotonic()
