"""The one owner of a background task: started once, cancelled and awaited on close (imports
nothing from the gateway, so every layer may use it).

A refresher, a listener or a poll loop holds a :class:`Background`; ``start`` creates the task
on the running loop unless one was started and not closed since (a task that ended on its own
is not started again before a ``close``), ``close`` cancels it and waits until it has ended (its
``finally`` blocks ran), so nothing it does outlives the component that started it; a second
``close`` while the first still waits waits for the same end. An exception the task ended with
is not raised again by ``close``: a loop logs its own failures.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["Background"]


class Background:
    """One named background task (module docstring)."""

    __slots__ = ("_ending", "_name", "_task")

    def __init__(self, name: str) -> None:
        self._name = name
        self._task: asyncio.Task[Any] | None = None
        self._ending: set[asyncio.Task[Any]] = set()
        """Tasks cancelled by a close and not ended yet: every close waits for them."""

    @property
    def started(self) -> bool:
        """Started and not closed since (the task may have ended on its own)."""
        return self._task is not None

    def start(self, work: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Run ``work()`` in a task of the running loop, unless this one was started already."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(work(), name=self._name)

    async def close(self) -> None:
        """Cancel the task and wait for its end (and for that of any task an earlier close
        cancelled that is still in its ``finally`` blocks); a no-op when nothing is running."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            self._ending.add(task)
            task.add_done_callback(self._ending.discard)
        if self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)
