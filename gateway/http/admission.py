"""HTTP admission for the MCP endpoint (MCP 2026-07-28 streamable-http.mdx §Sending Messages).

Pure checks plus one bounded body reader, each raising the status-table row it enforces:

- :func:`check_origin` — MCP 2025-11-25 transports §Security: a present, non-allow-listed
  ``Origin`` gets 403 (an absent one is fine: no CLI client sends it). The endpoint's list always
  holds the resource's own origin.
- :func:`check_content_type` — ``application/json`` with an optional ``charset=utf-8``, else 415.
- :func:`check_content_encoding` — no content coding but ``identity``, else 415 (never decoded).
- :func:`accepts` — RFC 9110 §12.5.1 media ranges with q-values; JSON must be acceptable, else 406.
- :func:`read_body` — the body cap, from ``Content-Length`` before reading and on the running total
  while streaming (chunked), 413 as soon as the cap is passed.
- :func:`client_ip` — the caller's address, trusted-proxy aware (right-most untrusted hop of
  ``X-Forwarded-For``); :func:`warn_untrusted_proxy` tells the operator, once, when a proxy on a
  private address forwards requests but ``trusted_proxies`` is empty.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from aiohttp import web

from gateway.errors import (
    BodyTooLarge,
    NotAcceptable,
    OriginForbidden,
    UnsupportedContentEncoding,
    UnsupportedMediaType,
)
from gateway.observability.logging import get_logger

__all__ = [
    "AcceptInfo",
    "Network",
    "accepts",
    "accepts_event_stream",
    "check_content_encoding",
    "check_content_type",
    "check_origin",
    "client_ip",
    "read_body",
    "warn_untrusted_proxy",
]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

JSON_TYPE: Final = "application/json"
SSE_TYPE: Final = "text/event-stream"
_log = get_logger("gateway.http")

MAX_ACCEPT_RANGES: Final = 32
"""Media ranges examined per Accept header; more is not a real client and is refused (406)."""


def check_origin(origin: str | None, allowed: frozenset[str]) -> None:
    """Raise OriginForbidden when ``Origin`` is present and not on the allowlist.

    Origins are compared as lowercase ``scheme://host[:port]`` strings (RFC 6454 §6.1
    serialisation); the literal ``null`` origin is refused unless listed.
    """
    if origin is None:
        return
    if origin.strip().lower().rstrip("/") not in allowed:
        raise OriginForbidden()


def check_content_type(value: str | None) -> None:
    """Accept ``application/json`` with at most a ``charset=utf-8`` parameter, else 415.

    MCP transports/index.mdx: messages are UTF-8 JSON. Any other charset (``latin-1``), any other
    parameter or a missing header is refused instead of guessed.
    """
    if value is None:
        raise UnsupportedMediaType()
    media, _, rest = value.partition(";")
    if media.strip().lower() != JSON_TYPE:
        raise UnsupportedMediaType()
    if not rest.strip():
        return
    for parameter in rest.split(";"):
        name, eq, raw = parameter.partition("=")
        if not eq or name.strip().lower() != "charset":
            raise UnsupportedMediaType()
        if raw.strip().strip('"').lower() not in {"utf-8", "utf8"}:
            raise UnsupportedMediaType()


def check_content_encoding(values: Sequence[str]) -> None:
    """Refuse any content coding other than ``identity`` with 415 (RFC 9110 §8.4, §15.5.16).

    Bodies are never decompressed: the listener runs with aiohttp's ``auto_decompress`` off,
    so a coded body could only be misread as JSON. Empty values are ignored.
    """
    for line in values:
        for coding in line.split(","):
            name = coding.strip().lower()
            if name and name != "identity":
                raise UnsupportedContentEncoding()


@dataclass(frozen=True, slots=True)
class AcceptInfo:
    """What the client's ``Accept`` header admits."""

    json: bool
    sse: bool


_ABSENT: Final = AcceptInfo(json=True, sse=False)


def accepts(values: Sequence[str]) -> AcceptInfo:
    """Evaluate every ``Accept`` line (RFC 9110 §12.5.1); raise NotAcceptable without JSON.

    The most specific matching range decides a type's q-value (``application/json`` beats
    ``application/*`` beats ``*/*``), so ``*/*, application/json;q=0`` excludes JSON. No header (or
    only empty ones) means "anything". SSE is reported only when explicitly acceptable
    (``text/event-stream`` or ``text/*``), because we only stream when the client asked for it.
    """
    info = _accepts_cached(tuple(values))
    if info is None:
        raise NotAcceptable()
    return info


def accepts_event_stream(values: Sequence[str]) -> bool:
    """A GET stream's ``Accept`` lists ``text/event-stream`` (or ``text/*``) with a q above 0
    (2025-06-18 basic/transports.mdx §Listening for Messages from the Server 2); no header, or
    ``*/*`` alone, is not asking for a stream."""
    ranges: list[tuple[str, float]] = []
    for line in values:
        for item in line.split(","):
            if item.strip():
                ranges.append(_media_range(item))
            if len(ranges) > MAX_ACCEPT_RANGES:
                return False
    return _q_for(ranges, "text", "event-stream", wildcard_all=False) > 0.0


@functools.lru_cache(maxsize=256)
def _accepts_cached(values: tuple[str, ...]) -> AcceptInfo | None:
    # Clients send the same few Accept values on every request: parse each once (bounded LRU).
    try:
        return _evaluate_accept(values)
    except NotAcceptable:
        return None


def _evaluate_accept(values: tuple[str, ...]) -> AcceptInfo:
    ranges: list[tuple[str, float]] = []
    for line in values:
        for item in line.split(","):
            if not item.strip():
                continue
            ranges.append(_media_range(item))
            if len(ranges) > MAX_ACCEPT_RANGES:
                raise NotAcceptable()
    if not ranges:
        return _ABSENT
    json_q = _q_for(ranges, "application", "json")
    if json_q <= 0.0:
        raise NotAcceptable()
    sse_q = _q_for(ranges, "text", "event-stream", wildcard_all=False)
    return AcceptInfo(json=True, sse=sse_q > 0.0)


def _media_range(item: str) -> tuple[str, float]:
    media, *params = item.split(";")
    q = 1.0
    for param in params:
        name, _, raw = param.partition("=")
        if name.strip().lower() == "q":
            try:
                q = float(raw.strip())
            except ValueError:
                q = 0.0  # an unreadable weight admits nothing rather than everything
            if not 0.0 <= q <= 1.0:
                q = 0.0
    return media.strip().lower(), q


def _q_for(
    ranges: Iterable[tuple[str, float]], kind: str, sub: str, *, wildcard_all: bool = True
) -> float:
    exact, partial, anything = f"{kind}/{sub}", f"{kind}/*", "*/*"
    best_rank, best_q = -1, 0.0
    for media, q in ranges:
        if media == exact:
            rank = 2
        elif media == partial:
            rank = 1
        elif media == anything and wildcard_all:
            rank = 0
        else:
            continue
        if rank > best_rank:
            best_rank, best_q = rank, q
        elif rank == best_rank:
            best_q = max(best_q, q)
    return best_q


async def read_body(request: web.Request, cap: int) -> bytes:
    """Read the body, never holding more than ``cap`` plus one network chunk; 413 past the cap.

    A declared ``Content-Length`` over the cap is refused before reading a byte. Chunked bodies
    are counted as they stream in, and refused as soon as the running total passes the cap.
    """
    declared = request.content_length
    if declared is not None and declared > cap:
        raise BodyTooLarge()
    stream = request.content
    if declared is not None:
        # Fast path: aiohttp frames the body by Content-Length, so it cannot exceed `declared`.
        return await stream.readexactly(declared) if declared else b""
    buffer = bytearray()
    while True:
        chunk = await stream.readany()
        if not chunk:
            return bytes(buffer)
        buffer += chunk
        if len(buffer) > cap:
            raise BodyTooLarge()


def client_ip(peer: str | None, forwarded_for: Sequence[str], trusted: Sequence[Network]) -> str:
    """The caller's IP: the TCP peer, or, behind trusted proxies, the right-most untrusted hop.

    ``X-Forwarded-For`` is read only when the TCP peer is a trusted proxy; hops are walked from the
    right (nearest) and every trusted proxy is skipped. Entries left of the first untrusted hop
    are client-controlled and ignored. An unparsable hop stops the walk at the last trusted one.
    """
    address = peer or "unknown"
    if not trusted or not forwarded_for or peer is None or not _is_trusted(peer, trusted):
        return address
    hops = [hop.strip() for line in forwarded_for for hop in line.split(",")]
    for hop in reversed(hops):
        if not hop:
            continue
        try:
            parsed = _unmapped(ipaddress.ip_address(hop))
        except ValueError:
            return address
        text = str(parsed)
        if not any(parsed in net for net in trusted):
            return text
        address = text
    return address


def _is_trusted(peer: str, trusted: Sequence[Network]) -> bool:
    try:
        parsed = _unmapped(ipaddress.ip_address(peer))
    except ValueError:
        return False
    return any(parsed in net for net in trusted)


def _unmapped(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    # A dual-stack listener reports IPv4 peers as ::ffff:a.b.c.d; compare them as IPv4.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def warn_untrusted_proxy(peer: str | None) -> bool:
    """Warn (the caller rate-limits it) that ``X-Forwarded-For`` arrives from a
    private or loopback peer while ``trusted_proxies`` is empty; return whether it warned.

    Such a peer is almost certainly the operator's reverse proxy: every client then shares the
    proxy's address for the per-IP limits (pre-auth rate, failed-auth budget, in-flight and
    connection caps), so one caller's bad tokens can lock everybody out.
    """
    if peer is None:
        return False
    try:
        address = _unmapped(ipaddress.ip_address(peer))
    except ValueError:
        return False
    if not (address.is_private or address.is_loopback):
        return False
    _log.warning(
        "trusted_proxies_unset",
        peer=str(address),
        hint="requests carry X-Forwarded-For from a private address but trusted_proxies is "
        "empty: every client shares this address for the per-IP limits; list the proxy "
        "in trusted_proxies",
    )
    return True
