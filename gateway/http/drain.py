"""The graceful-stop deadline, applied to the waits of requests already in flight.

When a replica is told to stop (SIGTERM), ``gateway.app`` calls :meth:`DrainBound.begin` with the
moment by which every request must have its answer. From then on, every registered wait (a body
still arriving, a tool call running) ends at that moment at the latest, so the request is
*answered* before the listener is closed instead of being cut with no response:

- a body that has not arrived is ``503 draining`` (nothing ran yet: the client may retry on
  another replica);
- a tool call still running becomes the fixed "did not answer before the request deadline" tool
  error (it may have run: no automatic retry is invited).

The hot path pays one set insertion and removal per wait.
"""

from __future__ import annotations

from gateway.deadlines import Deadline

__all__ = ["DrainBound"]


class DrainBound:
    """Registered deadlines (:mod:`gateway.deadlines`), rescheduled to the drain deadline on
    begin."""

    __slots__ = ("_timers", "at")

    def __init__(self) -> None:
        self.at: float | None = None
        """The drain deadline (``time.monotonic()`` / loop time), once a stop began."""
        self._timers: set[Deadline] = set()

    def bound(self, deadline: float) -> float:
        """``deadline``, or the drain deadline when that is earlier."""
        at = self.at
        return deadline if at is None or at >= deadline else at

    def cut(self, deadline: float) -> bool:
        """Whether a wait bounded by :meth:`bound` ended early because of the drain."""
        return self.at is not None and self.at < deadline

    def watch(self, timer: Deadline) -> None:
        self._timers.add(timer)

    def unwatch(self, timer: Deadline) -> None:
        self._timers.discard(timer)

    def begin(self, at: float) -> None:
        """Bound every running and future wait by ``at``."""
        self.at = at
        for timer in list(self._timers):
            when = timer.when()
            if when is None or when > at:
                timer.reschedule(at)
