"""The login surface's per-address budget (``login.pre_auth_rate``), checked before anything
else a page does: no cookie opened, no store, issuer or upstream asked.

Every request under the prefix counts (pages, the sign-in's and the upstreams' answers, the
connect API of ``mcp-gateway connect``, the client metadata document, unknown paths), under the
client's address as the MCP endpoint reads it (behind ``trusted_proxies``, from
``X-Forwarded-For``; IPv6 per /64: :func:`~gateway.limits.keys.client_key`), in the replica's
rate limiter: with ``state.backend: redis`` shared by every replica, and decided as
``state.on_store_error.ip`` says when Redis does not answer (the key is of the ``ip`` kind, apart
from the MCP endpoint's own ``limits.pre_auth_rate`` budget). Past it: 429
``login_rate_limited`` with ``Retry-After``, counted in ``rate_limited_total{scope="login"}`` and
``rejections_total{row}``, neither audited nor logged one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from aiohttp import web

from gateway.config.limits_model import Rate
from gateway.errors import LoginRateLimited
from gateway.limits.keys import client_key
from gateway.limits.memory import retry_after_seconds
from gateway.observability.metrics import Metrics
from gateway.seams import RateLimiter

__all__ = ["KEY_PREFIX", "SurfaceAdmission"]

KEY_PREFIX: Final = "ip:login:"
"""The limiter key's prefix (of the ``ip`` kind: ``state.on_store_error.ip``)."""


class SurfaceAdmission:
    """One request's admission to the surface (module docstring)."""

    def __init__(
        self,
        limiter: RateLimiter,
        rate: Rate,
        client_ip: Callable[[web.Request], str],
        metrics: Metrics | None = None,
    ) -> None:
        self._limiter = limiter
        self._rate = rate
        self._client_ip = client_ip
        self._limited = metrics.rate_limited_total.labels(scope="login") if metrics else None
        self._rejected = (
            metrics.rejections_total.labels(row=LoginRateLimited.row) if metrics else None
        )

    async def admit(self, request: web.Request) -> None:
        """Count the request; past the budget raise :class:`LoginRateLimited`."""
        key = KEY_PREFIX + client_key(self._client_ip(request))
        wait = await self._limiter.hit(key, self._rate.count, self._rate.per_s)
        if wait is None:
            return
        if self._limited is not None and self._rejected is not None:
            self._limited.inc()
            self._rejected.inc()
        raise LoginRateLimited(retry_after=retry_after_seconds(wait), detail="rate")
