"""Admission of a 2025-03-26 JSON-RPC batch: every HTTP-level check before any member runs.

A batch is answered as a whole when one member needs a step-up (403), is over a rate limit or
concurrency cap (429) or the token expired (401), so those checks run here for every member
first: either all of them pass and the members then run without re-checking (``admitted``), or
nothing runs. Members that fail with a JSON-RPC row (unknown tool or method) are left to answer
their own error entry.
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.http.call_limits import CallLimits
from gateway.http.turn import Route, Turn, check_expiry
from gateway.protocol.messages import McpMessage
from gateway.seams import Lease

__all__ = ["admit_batch"]


async def admit_batch(
    messages: tuple[McpMessage, ...],
    turn: Turn,
    route: Callable[[McpMessage], Route | None],
    limits: CallLimits,
) -> list[Lease]:
    """Each member's route's own checks in order, the expiry, then the calls' limits.

    Returns the concurrency leases taken (one per distinct capped tool: members run one after
    another); the caller releases them with :func:`gateway.http.call_limits.release_leases`.
    """
    calls: list[str] = []
    for message in messages:
        if message.is_notification or message.rejection is not None:
            continue
        found = route(message)
        if found is None or found.admit is None:
            continue
        name = found.admit(message, turn)
        if name is not None:
            calls.append(name)
    check_expiry(turn)
    return await limits.admit_calls(turn, calls)
