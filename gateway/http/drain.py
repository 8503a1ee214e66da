"""The graceful-stop deadline, applied to the waits of requests already in flight.

When a replica is told to stop (SIGTERM), ``gateway.app`` calls :meth:`DrainBound.begin` with the
moment by which every request must have its answer. From then on, every registered wait (a body
still arriving, a tool call running) ends at that moment at the latest, so the request is
*answered* before the listener is closed instead of being cut with no response:

- a body that has not arrived is ``503 draining`` (nothing ran yet: the client may retry on
  another replica);
- a tool call still running becomes the fixed "did not answer before the request deadline" tool
  error (it may have run: no automatic retry is invited).

The hot path pays one set insertion and removal per wait (none for a body already buffered).
"""

from __future__ import annotations

from aiohttp import web

from gateway.deadlines import Deadline, deadline_at
from gateway.errors import Draining, RequestTimeout
from gateway.http.admission import read_body

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

    async def read_body(self, request: web.Request, cap: int, deadline: float) -> bytes:
        """The request's body (at most ``cap`` bytes, :func:`~gateway.http.admission.read_body`)
        by ``deadline`` (``time.monotonic()``), else ``408 request_timeout``; or ``503
        draining`` when a stop cut the wait short (nothing ran yet: the client may retry on
        another replica)."""
        if request.content.is_eof():
            # The whole body is already buffered: no read can block, skip the timer.
            return await read_body(request, cap)
        try:
            with deadline_at(self.bound(deadline)) as timer:
                self.watch(timer)
                try:
                    return await read_body(request, cap)
                finally:
                    self.unwatch(timer)
        except TimeoutError:
            raise (Draining(retry_after=1) if self.cut(deadline) else RequestTimeout()) from None
