"""A deadline around a block on the hot path: ``asyncio.timeout_at`` at a fraction of its cost.

Every ``tools/call`` runs two deadlines (the dispatcher's around the backend call, the outbound
exchange's). ``asyncio.Timeout`` on Python 3.11 looks the running loop up three times per use
(``timeout()``, ``current_task()``, ``reschedule()``), and each lookup is a ``getpid()`` system
call (the fork check of ``get_running_loop``); on the hosts measured, system calls are what
costs most (docs/performance.md: ``getpid`` was 2.9 % of the gateway's CPU per call). This
timer remembers the loop per thread and finds the task with ``current_task(loop)``, a dict
lookup; a remembered loop that is not running the current task (another loop later in the same
thread, as in tests) is looked up afresh.

The semantics are ``asyncio.timeout_at``'s (3.12 and later): at ``when`` the task is cancelled;
the timer that expired turns that cancellation into ``TimeoutError`` when leaving its block,
unless the task was also cancelled by someone else (``Task.cancelling()`` counts); ``when`` may
be moved (``reschedule``) while the block runs. It is a plain (synchronous) context manager:
entering and leaving never wait. Imports nothing from the gateway, so every layer may use it.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import Final

__all__ = ["Deadline", "deadline_at"]

_CREATED: Final = 0
_ENTERED: Final = 1
_EXPIRING: Final = 2
_EXPIRED: Final = 3
_EXITED: Final = 4

_local = threading.local()


def _loop_and_task() -> tuple[asyncio.AbstractEventLoop, asyncio.Task[object]]:
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is not None:
        task = asyncio.current_task(loop)
        if task is not None:
            return loop, task
    loop = asyncio.get_running_loop()
    task = asyncio.current_task(loop)
    if task is None:
        raise RuntimeError("a deadline applies inside a task")
    _local.loop = loop
    return loop, task


class Deadline:
    """``with deadline_at(when) as timer:`` — see the module docstring."""

    __slots__ = ("_cancelling", "_handle", "_loop", "_state", "_task", "_when")

    def __init__(self, when: float | None) -> None:
        self._when = when
        self._state = _CREATED
        self._handle: asyncio.Handle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0

    def when(self) -> float | None:
        return self._when

    def expired(self) -> bool:
        return self._state in (_EXPIRING, _EXPIRED)

    def reschedule(self, when: float | None) -> None:
        """Move the deadline (``None``: none) while the block runs."""
        if self._state != _ENTERED:
            raise RuntimeError("only a running deadline can be rescheduled")
        self._when = when
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if when is not None:
            loop = self._loop
            assert loop is not None
            if when <= loop.time():
                self._handle = loop.call_soon(self._on_timeout)
            else:
                self._handle = loop.call_at(when, self._on_timeout)

    def __enter__(self) -> Deadline:
        if self._state != _CREATED:
            raise RuntimeError("a deadline is entered once")
        loop, task = _loop_and_task()
        self._loop = loop
        self._task = task
        self._cancelling = task.cancelling()
        self._state = _ENTERED
        if self._when is not None:  # a time already past fires at the next iteration
            self._handle = loop.call_at(self._when, self._on_timeout)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        handle = self._handle
        if handle is not None:
            handle.cancel()
            self._handle = None
        if self._state == _EXPIRING:
            self._state = _EXPIRED
            assert self._task is not None
            if (
                self._task.uncancel() <= self._cancelling
                and exc_type is not None
                and issubclass(exc_type, asyncio.CancelledError)
            ):
                raise TimeoutError from exc_val
        else:
            self._state = _EXITED

    def _on_timeout(self) -> None:
        assert self._task is not None
        self._task.cancel()
        self._state = _EXPIRING
        self._handle = None


def deadline_at(when: float | None) -> Deadline:
    """A deadline at ``when`` (loop time, i.e. ``time.monotonic()``); ``None``: no deadline."""
    return Deadline(when)
