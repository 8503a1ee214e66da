"""Stopping a listener without resetting connections a proxy has already written a request on.

Closing a listening socket resets (RST) every connection whose handshake the kernel completed
but the process has not accepted yet. A reverse proxy writes its request as soon as it is
connected, so each such connection carries a request the proxy then answers 502: nginx resends
a POST it has sent only with ``proxy_next_upstream non_idempotent``, which would also repeat
tool calls a crashed replica may have run. Accepting what is queued just before the close
(:meth:`gateway.app.server.GuardedServer.take_pending`) leaves a window in which handshakes
still complete; a replica descheduled there (a loaded host) resets every connection made
meanwhile (issue 43: 2 of 3,560 requests behind nginx during a rolling restart).

:func:`refuse_new_connections` closes that window on Linux with a classic BPF socket filter on
the listening socket that drops the segments opening a connection (SYN without ACK): no new
handshake can start, the ones already under way complete (their ACK passes) and are accepted
as usual. The client retransmits a dropped SYN after its initial retransmission timeout (1 s);
by then the listener is closed and the retransmission is refused, a connect error that a proxy
retries on another server, nothing having been sent. Elsewhere (another OS, a Unix socket) the
listener stops as before.
"""

from __future__ import annotations

import ctypes
import os
import socket
import sys
from typing import Any, Final

__all__ = ["HANDSHAKE_GRACE_S", "refuse_new_connections"]

HANDSHAKE_GRACE_S: Final = 0.1
"""After the filter is attached, how long the handshakes already under way get to complete and
be accepted before the listener closes (a round trip between proxy and gateway: well under)."""

_SO_ATTACH_FILTER: Final = getattr(socket, "SO_ATTACH_FILTER", 26)
"""``SO_ATTACH_FILTER`` (26 in Linux's asm-generic socket.h; Python does not export it)."""


class _Instruction(ctypes.Structure):
    """``struct sock_filter``."""

    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _Program(ctypes.Structure):
    """``struct sock_fprog``."""

    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction)))


# A TCP socket's filter sees the segment from its TCP header on; byte 13 holds the flags.
_DROP_OPENING_SEGMENTS: Final = (
    _Instruction(0x30, 0, 0, 13),  # ld  byte [13]       A = flags
    _Instruction(0x54, 0, 0, 0x12),  # and #(SYN|ACK)
    _Instruction(0x15, 0, 1, 0x02),  # jeq #SYN, drop, keep
    _Instruction(0x06, 0, 0, 0),  # drop: ret #0
    _Instruction(0x06, 0, 0, 0xFFFFFFFF),  # keep: ret #-1 (the whole segment)
)


def refuse_new_connections(listening: Any) -> bool:
    """Drop the SYNs that reach ``listening`` (a listening TCP socket, or the object the event
    loop exposes for one) from now on; True when the filter is attached."""
    if sys.platform != "linux":
        return False
    try:
        sock = socket.socket(fileno=os.dup(listening.fileno()))
    except (OSError, AttributeError, ValueError):
        return False
    with sock:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return False
        instructions = (_Instruction * len(_DROP_OPENING_SEGMENTS))(*_DROP_OPENING_SEGMENTS)
        program = _Program(len(_DROP_OPENING_SEGMENTS), instructions)
        try:
            # The kernel copies the program here: ``instructions`` need not outlive the call.
            sock.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, bytes(program))
        except OSError:
            return False
    return True
