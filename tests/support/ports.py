"""Ports for servers a test starts as processes on a port fixed in advance (and restarts)."""

from __future__ import annotations

import secrets
import socket
from pathlib import Path


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


_handed_out: set[int] = set()
"""Ports this process already handed out: a stack picks all its ports before it binds any, so
two picks of one port (a 1-in-250 chance for the ten ports of five replicas) must not happen."""


def free_port() -> int:
    """A port that is free now, chosen below the ephemeral range.

    A replica is started (and restarted) on a port chosen in advance. Port 0 would pick one in
    the ephemeral range, which every outgoing connection on the machine draws from too, so a
    busy machine could take it before the replica binds (EADDRINUSE).
    """
    low, _ = _ephemeral_range()
    rng = secrets.SystemRandom()
    for _ in range(200):
        port = rng.randrange(max(1024, low - 12_000), low)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError("no free port below the ephemeral range")
