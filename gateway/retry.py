"""How background refreshers wait: exponential back-off and a sleep a request can cut short.

The issuer's metadata, its JWK Set and each backend's catalog are refreshed by loops of the
same shape; their waiting lives here so the loops agree (and share one fix). Imports nothing
from the gateway, so every layer may use it.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["backoff_s", "sleep_or_wake"]


def backoff_s(failures: int, first_s: float, cap_s: float) -> float:
    """The wait after ``failures`` (≥ 1) failures in a row: ``first_s``, doubling, at most
    ``cap_s``."""
    return min(first_s * 2.0 ** (failures - 1), cap_s)


async def sleep_or_wake(wake: asyncio.Event, delay_s: float) -> None:
    """Wait ``delay_s``, or less if ``wake`` is set meanwhile."""
    # asyncio.timeout, not wait_for: 3.11's wait_for can lose a cancel that races with the
    # event being set, which would hang the owner's close().
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(delay_s):
            await wake.wait()
