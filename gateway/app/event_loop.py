"""The event loop ``serve`` runs on (``event_loop`` / ``--event-loop``).

uvloop (libuv underneath) runs the same asyncio code with cheaper transports, timers and
callbacks: about a tenth off the gateway's CPU per call (docs/performance.md). It is a
dependency where it builds (Linux, macOS); ``auto`` uses it when it is importable and falls
back to the standard library's loop otherwise, ``uvloop`` requires it, ``asyncio`` never uses
it (for comparison, or a platform where uvloop misbehaves).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from gateway.config import EventLoop

__all__ = ["UvloopMissing", "loop_factory", "loop_name", "run"]

T = TypeVar("T")


class UvloopMissing(RuntimeError):
    """``event_loop: uvloop`` but uvloop cannot be imported."""


def loop_factory(choice: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None for the standard library's loop."""
    if choice == "asyncio":
        return None
    try:
        import uvloop  # noqa: PLC0415 - optional at run time
    except ImportError:
        if choice == "uvloop":
            raise UvloopMissing("event_loop: uvloop, but uvloop is not installed") from None
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], choice: EventLoop) -> T:
    """``asyncio.run`` on the chosen loop."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)


def loop_name() -> str:
    """``uvloop`` or ``asyncio``: the loop running now (for the ``gateway.started`` line)."""
    return type(asyncio.get_running_loop()).__module__.split(".", 1)[0]
