"""The per-client-IP failed-authentication budget: it protects issuers from token guessing.

One budget per client key (:func:`gateway.limits.keys.client_key`: the IPv4 address or the
IPv6 /64), counted under limiter key ``authfail:<key>``, shared by every issuer: an address that
guesses at one issuer does not get a fresh budget at the next. A refusal is charged against the
``failed_auth_rate`` of the issuer that refused it.

* :meth:`FailedAuthBudget.check` runs before a token that is not cached is sent to an issuer:
  within budget it passes; over budget one *probe* per ``failed_auth_probe_interval_s`` still
  passes (a valid token from an address a guesser exhausted gets in), everything else is 429
  without an issuer call.
* :meth:`FailedAuthBudget.charge` counts one issuer refusal, once per flight however many
  requests joined it. Local JWT refusals cost no issuer call and are never charged (nor
  checked: nothing is sent anywhere).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from gateway.bounded import BoundedMap
from gateway.config import Rate
from gateway.errors import RateLimited
from gateway.limits.memory import retry_after_seconds
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.seams import RateLimiter

__all__ = ["MAX_BLOCKED_IPS", "FailedAuthBudget"]

MAX_BLOCKED_IPS: Final = 100_000
"""Client keys remembered as over their failed-auth budget (LRU; bounded memory)."""

_log = get_logger("gateway.auth")


class FailedAuthBudget:
    def __init__(
        self,
        limiter: RateLimiter,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._limiter = limiter
        self._metrics = metrics
        self._clock = clock
        self._blocked: BoundedMap[str, tuple[float, float, float]] = BoundedMap(MAX_BLOCKED_IPS)
        """Over-budget client keys -> (blocked until, next probe allowed at, probe interval),
        expiring when the block ends."""

    def check(self, budget_key: str, client_ip: str, fingerprint: str) -> None:
        """Let an uncached token from ``budget_key`` go to an issuer, or raise 429."""
        if budget_key not in self._blocked:
            return
        now = self._clock()
        blocked = self._blocked.peek(budget_key, now)
        if blocked is None:
            return
        until, next_probe, interval = blocked
        if interval > 0 and now >= next_probe:
            self._blocked.put(budget_key, (until, now + interval, interval), until)
            _log.info("failed_auth_probe", client_ip=client_ip, fingerprint=fingerprint)
            return
        if self._metrics is not None:
            self._metrics.rate_limited_total.labels(scope="failed_auth").inc()
        _log.info("failed_auth_budget_exhausted", client_ip=client_ip, fingerprint=fingerprint)
        wait = min(until, next_probe) - now if interval > 0 else until - now
        raise RateLimited(
            retry_after=retry_after_seconds(wait), detail="failed-auth budget exhausted"
        )

    async def charge(self, budget_key: str, rate: Rate | None, probe_interval_s: float) -> None:
        """Charge one issuer refusal to ``budget_key`` (``rate``: the refusing issuer's)."""
        if rate is None:
            return
        wait = await self._limiter.hit("authfail:" + budget_key, rate.count, rate.per_s)
        if wait is None:
            return
        now = self._clock()
        previous = self._blocked.peek(budget_key, now)
        # A fresh block probes one interval from now; an extended one keeps its next probe.
        next_probe = now + probe_interval_s if previous is None else previous[1]
        self._blocked.put(budget_key, (now + wait, next_probe, probe_interval_s), now + wait)
