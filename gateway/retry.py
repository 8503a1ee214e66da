"""How background refreshers wait: exponential back-off and a sleep a request can cut short.

The issuer's metadata, its JWK Set and each backend's catalog are refreshed by loops of the
same shape; their waiting lives here so the loops agree (and share one fix). Imports nothing
from the gateway, so every layer may use it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

__all__ = ["backoff_s", "refresh_forever", "sleep_or_wake"]


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


async def refresh_forever(
    attempt: Callable[[], Awaitable[bool]],
    *,
    every_s: float,
    first_retry_s: float,
    max_retry_s: float,
    succeeded: bool,
    crashed: Callable[[], None],
) -> None:
    """Run ``attempt`` (True: it succeeded) until cancelled: ``every_s`` after a success, with
    :func:`backoff_s` after failures in a row. ``succeeded``: how the attempt before the loop
    went. An exception is a bug: ``crashed`` reports it (from within the ``except``) and the
    loop goes on as after a failure."""
    failures = 0 if succeeded else 1
    while True:
        delay = backoff_s(failures, first_retry_s, max_retry_s) if failures else every_s
        await asyncio.sleep(delay)
        try:
            ok = await attempt()
        except Exception:  # a bug must not end the refresher: keep retrying, loudly
            crashed()
            ok = False
        failures = 0 if ok else failures + 1
