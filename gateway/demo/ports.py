"""Ports chosen before their server binds, below the kernel's ephemeral range.

The demo's resource URL (and the vault's) must name a port before the gateway binds it, so a
free one is chosen in advance. A port in the ephemeral range can be taken in between by any
outgoing connection on the machine (EADDRINUSE at bind, seen on a busy CI host), so the choice
is made below that range, where only listeners live.

Processes that choose at the same time (parallel test workers) each take their own slice of
that range with :func:`share`, so two of them can never hand out the same port.
"""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_BELOW = 12_000
"""How far below the ephemeral range's floor the choice is made."""

_handed_out: set[int] = set()
"""Ports this process already handed out: a stack picks all its ports before it binds any,
so the same port must not be handed out twice (a 1-in-250 chance for ten ports)."""

_slice: tuple[int, int] = (0, 1)
"""This process's slice of the range: (index, count), see :func:`share`."""


def share(index: int, count: int) -> None:
    """Choose only from slice ``index`` of ``count`` equal slices of the range from now on: each
    of ``count`` processes that choose at the same time calls this with its own ``index``."""
    if not 0 <= index < count:
        raise ValueError(f"slice {index} of {count}")
    global _slice  # noqa: PLW0603 - one setting per process, made before any choice
    _slice = (index, count)


def _ephemeral_floor() -> int:
    try:
        return int(_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now, below the ephemeral range and not handed out before."""
    floor = _ephemeral_floor()
    bottom = max(1024, floor - _BELOW)
    index, count = _slice
    width = (floor - bottom) // count
    low = bottom + index * width
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    rng = secrets.SystemRandom()
    for _ in range(200):
        port = rng.randrange(low, low + width)
        if port in _handed_out:
            continue
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise OSError(f"no free port on {host} below the ephemeral range")
