"""Coalesce concurrent work per key: one running task, every caller awaits it.

Used where many requests need the same slow answer at once: one introspection per uncached
token (``gateway/auth``), one RFC 8693 token exchange per caller token and backend
(``gateway/backend``). Imports nothing from the gateway, so every layer may use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["SingleFlight"]

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """Coalesce concurrent calls per key into one running task.

    The work runs in its own task, so a caller that is cancelled (client disconnect) does not
    cancel the work the other callers wait for; each caller awaits it through
    :func:`asyncio.shield`. The entry is removed when the task finishes, so a later call starts
    fresh work (results are kept by :class:`TokenCache`, not here).
    """

    def __init__(self) -> None:
        self._flights: dict[bytes, asyncio.Task[T]] = {}

    def __len__(self) -> int:
        return len(self._flights)

    def joining(self, key: bytes) -> asyncio.Task[T] | None:
        """The flight already running for ``key``, if any."""
        return self._flights.get(key)

    def start(self, key: bytes, work: Callable[[], Awaitable[T]]) -> asyncio.Task[T]:
        async def run() -> T:
            return await work()

        task = asyncio.get_running_loop().create_task(run())
        self._flights[key] = task

        def done(finished: asyncio.Task[T]) -> None:
            if self._flights.get(key) is finished:
                del self._flights[key]
            if not finished.cancelled():
                finished.exception()  # mark retrieved: every waiter may have gone away

        task.add_done_callback(done)
        return task

    async def cancel_all(self) -> None:
        tasks = list(self._flights.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
