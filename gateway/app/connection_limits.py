"""What bounds a listener at the connection level, apart from the HTTP parsing itself.

Split from :mod:`gateway.app.listener`, which keeps aiohttp's request handler and the request-head
checks (deadline, size, malformed HTTP): here are the bounds as configured
(:class:`ListenerLimits`), the open-connection counts per replica and per peer that are checked
at accept time (:class:`ConnectionCounts`, ``trusted_proxies`` exempt), and the throttle that
keeps a flood of refused requests from becoming a flood of log lines (:class:`LogThrottle`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from dataclasses import dataclass
from typing import Any, Final

from gateway.config import Config
from gateway.errors import GatewayError, OverCapacity, RateLimited
from gateway.limits.keys import client_key
from gateway.observability.logging import get_logger

__all__ = ["ConnectionCounts", "ListenerLimits", "LogThrottle", "Network"]

log = get_logger("gateway.listener")

CONNECTION_RETRY_S: Final = 1
"""``Retry-After`` of a connection refused over a cap."""
LOG_INTERVAL_S: Final = 1.0
"""At most one ``http.refused`` line per interval; the next one counts the suppressed lines."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class ListenerLimits:
    """The connection-level bounds of one listener (see :mod:`gateway.app.listener`), taken from
    the configuration (:meth:`from_config`), whose defaults are the ones documented."""

    header_timeout_s: float
    keepalive_timeout_s: float
    max_header_bytes: int
    max_connections: int
    max_connections_per_ip: int
    exempt: tuple[Network, ...]
    """Peers without a per-IP connection cap (``trusted_proxies``)."""

    @classmethod
    def from_config(cls, config: Config) -> ListenerLimits:
        limits = config.limits
        return cls(
            header_timeout_s=limits.header_timeout_s,
            keepalive_timeout_s=limits.keepalive_timeout_s,
            max_header_bytes=limits.max_header_bytes,
            max_connections=limits.max_connections,
            max_connections_per_ip=limits.ip_connections,
            exempt=config.trusted_proxies,
        )


class LogThrottle:
    """One log line per ``LOG_INTERVAL_S`` at most; the next line reports how many were dropped
    (a flood of bad requests must not become a flood of log lines)."""

    def __init__(self) -> None:
        self._next = 0.0
        self._suppressed = 0

    def warning(self, event: str, **fields: Any) -> None:
        now = time.monotonic()
        if now < self._next:
            self._suppressed += 1
            return
        self._next = now + LOG_INTERVAL_S
        suppressed, self._suppressed = self._suppressed, 0
        log.warning(event, suppressed=suppressed, **fields)


class ConnectionCounts:
    """Open-connection counts per replica and per client key, shared by one server's handlers."""

    def __init__(self, limits: ListenerLimits) -> None:
        self._limits = limits
        self.total = 0
        self._per_key: dict[str, int] = {}
        self.idle = asyncio.Event()
        self.idle.set()

    def admit(self, peer: str | None) -> tuple[str | None, GatewayError | None]:
        """Count a new connection: (its per-IP key or None when exempt, a refusal or None)."""
        limits = self._limits
        if self.total >= limits.max_connections:
            return None, OverCapacity(retry_after=CONNECTION_RETRY_S)
        key = None if peer is None or _exempt(peer, limits.exempt) else client_key(peer)
        if key is not None:
            used = self._per_key.get(key, 0)
            if used >= limits.max_connections_per_ip:
                return None, RateLimited(retry_after=CONNECTION_RETRY_S)
            self._per_key[key] = used + 1
        self.total += 1
        self.idle.clear()
        return key, None

    def release(self, key: str | None) -> None:
        self.total -= 1
        if self.total == 0:
            self.idle.set()
        if key is None:
            return
        used = self._per_key.get(key, 0) - 1
        if used <= 0:
            self._per_key.pop(key, None)
        else:
            self._per_key[key] = used


def _exempt(peer: str, networks: tuple[Network, ...]) -> bool:
    if not networks:
        return False
    try:
        address = ipaddress.ip_address(peer.partition("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)
