"""``state.on_store_error`` for limits: a shared limiter with this replica's own as fallback.

:class:`FallbackRateLimiter` and :class:`FallbackLeases` implement the same Protocols as the
limiters they wrap (:class:`gateway.seams.RateLimiter`, :class:`gateway.seams.ConcurrencyLimiter`).
Each decision goes to the shared (Redis) limiter; when the store cannot answer in time
(:class:`~gateway.state.store.StoreUnavailable`) it is counted in
``mcp_gateway_state_store_errors_total{kind}`` and decided by the policy of its kind:

* ``local``: by this replica's in-memory limiter (the limit then holds per replica, as with
  ``state.backend: memory``, until Redis answers again);
* ``deny``: refused (429 with ``Retry-After: 1`` at the call site).

The store logs the outage once (``state_store.unavailable``) and the recovery once; no line per
request.
"""

from __future__ import annotations

import contextlib
from typing import Final, Generic, TypeVar

from gateway.config import StoreErrorPolicy
from gateway.observability.metrics import Metrics
from gateway.seams import ConcurrencyLimiter, Lease, RateLimiter
from gateway.state.store import StoreUnavailable

__all__ = [
    "DENY_WAIT_S",
    "KIND_PREFIXES",
    "FallbackLeases",
    "FallbackRateLimiter",
    "SharedRateLimiter",
]

_Limiter = TypeVar("_Limiter")

DENY_WAIT_S: Final = 1.0
"""The wait (``Retry-After``) of a decision denied because the store could not answer."""


class _Fallback(Generic[_Limiter]):
    """The shared limiter, this replica's own, and what a store failure of ``kind`` does."""

    def __init__(
        self,
        shared: _Limiter,
        local: _Limiter,
        *,
        kind: str,
        policy: StoreErrorPolicy,
        metrics: Metrics | None = None,
    ) -> None:
        self._shared: _Limiter = shared
        self._local: _Limiter = local
        self._policy = policy
        self._errors = metrics.state_store_errors_total.labels(kind=kind) if metrics else None

    def _store_failed(self) -> _Limiter | None:
        """Count the failure; the limiter that decides instead (None: ``deny``)."""
        if self._errors is not None:
            self._errors.inc()
        return None if self._policy == "deny" else self._local


class FallbackRateLimiter(_Fallback[RateLimiter]):
    async def hit(self, key: str, count: int, per_s: float) -> float | None:
        try:
            return await self._shared.hit(key, count, per_s)
        except StoreUnavailable:
            local = self._store_failed()
            return DENY_WAIT_S if local is None else await local.hit(key, count, per_s)


class FallbackLeases(_Fallback[ConcurrencyLimiter]):
    async def acquire(self, key: str, limit: int, hold_s: float) -> Lease | None:
        """A lease, or None when every slot is taken (or the store failed under ``deny``)."""
        try:
            lease = await self._shared.acquire(key, limit, hold_s)
        except StoreUnavailable:
            local = self._store_failed()
            return None if local is None else await local.acquire(key, limit, hold_s)
        return None if lease is None else _QuietLease(lease)


class _QuietLease:
    """A shared lease whose release never fails the request: an unreleased lease expires."""

    __slots__ = ("_lease",)

    def __init__(self, lease: Lease) -> None:
        self._lease = lease

    async def release(self) -> None:
        with contextlib.suppress(StoreUnavailable):
            await self._lease.release()


KIND_PREFIXES: Final = (
    ("ip:", "ip"),
    ("sub:", "principal"),
    ("tool:", "tool"),
    ("authfail:", "failed_auth"),
)
"""Limiter keys are namespaced by what they limit; the namespace picks the ``on_store_error``
policy (``state.on_store_error.<kind>``) and the ``state_store_errors_total`` label."""


class SharedRateLimiter:
    """The replica's one :class:`gateway.seams.RateLimiter` over a shared store: each key goes
    to the :class:`FallbackRateLimiter` of its kind (:data:`KIND_PREFIXES`); a key of no known
    kind to ``default``."""

    def __init__(self, by_kind: dict[str, RateLimiter], default: RateLimiter) -> None:
        self._routes = tuple((prefix, by_kind[kind]) for prefix, kind in KIND_PREFIXES)
        self._default = default

    async def hit(self, key: str, count: int, per_s: float) -> float | None:
        for prefix, limiter in self._routes:
            if key.startswith(prefix):
                return await limiter.hit(key, count, per_s)
        return await self._default.hit(key, count, per_s)
