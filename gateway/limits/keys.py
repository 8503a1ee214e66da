"""The keys limits count under: the client key of every per-IP limit (pre-auth rate,
failed-auth budget, in-flight and connection caps) and the principal key of every per-subject one.

IPv4 addresses count one by one. IPv6 clients are counted by their **/64** prefix: a /64 is the
smallest network an ISP or cloud assigns to one subscriber or host (RFC 6177, RFC 7421), and any
host in it can pick fresh addresses at will (privacy addresses, RFC 8981), so keying by the full
address would give one client 2^64 budgets. An IPv4-mapped IPv6 address (``::ffff:a.b.c.d``,
how a dual-stack listener reports IPv4 peers) counts as its IPv4 address. Logs keep the full
address; only limiter keys are widened.

A subject is a name **its issuer** gives: two issuers may both have an ``alice``, so every
per-subject limit (``limits.principal_rate``, ``max_in_flight_per_principal``, a rule's
``rate_limit`` and ``max_concurrency``) counts under :func:`principal_key`, the issuer and the
subject together.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Final

from gateway.seams import Principal

__all__ = ["IPV6_PREFIX", "client_key", "principal_key"]

IPV6_PREFIX: Final = 64


def client_key(ip: str) -> str:
    """The per-IP limiter key for ``ip``: the address for IPv4, the /64 network for IPv6.

    Anything that is not an IP address (``unknown``) is returned unchanged.
    """
    if ":" not in ip:
        return ip  # IPv4 (or "unknown"): the fast path, no parsing
    return _ipv6_key(ip)


@functools.lru_cache(maxsize=4096)
def _ipv6_key(ip: str) -> str:
    try:
        address = ipaddress.IPv6Address(ip.partition("%")[0])  # drop a zone id (fe80::1%eth0)
    except ValueError:
        return ip
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, IPV6_PREFIX), strict=False))


def principal_key(principal: Principal) -> str:
    """The per-subject limiter key of ``principal``: its issuer and its subject, each prefixed
    with its length, so no issuer/subject pair can spell another's key whatever characters a
    subject holds, and text appended after it (``:<tool>``) cannot either."""
    issuer, subject = principal.issuer, principal.subject
    return f"{len(issuer)}:{issuer}{len(subject)}:{subject}"
