"""Metric series updated on every call, without prometheus-client's per-update lock.

prometheus-client keeps each series' value in a ``MutexValue``: every ``inc()`` and every
``observe()`` takes a ``threading.Lock`` (a histogram's observation two of them, after a
Python loop over its buckets), behind two layers of argument checks. A ``tools/call`` updated
ten such values (requests, request duration, backend call and duration, token cache,
authentications, requests in flight). The series bound here keep the same value objects'
interface (what the registry reads at a scrape) without the lock, and the hot path calls the
value directly:

- :func:`counter` and :func:`gauge` give a series' :class:`LoopValue` (``inc()``; a gauge's
  ``dec()`` too);
- :func:`histogram` gives a :class:`LoopHistogram` (``observe(seconds)``: the sum and one
  bucket, found by bisection, the same bucket as prometheus-client's ``amount <= bound``).

Why no lock is needed: the series bound here are updated only by code that runs on the
process's event loop (one thread; ``serve --workers N`` runs processes, each with its own
registry), so no two updates ever interleave, and a scrape (the ops listener, on the same loop)
reads a float attribute, which is atomic under the GIL anyway. A series updated from another
thread (the OTLP exporter's, a policy reload in the executor) must not be bound here. The
exposition is unchanged: the registry reads ``get()`` and ``get_exemplar()`` as before.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

__all__ = ["LoopHistogram", "LoopValue", "counter", "gauge", "histogram"]


class LoopValue:
    """prometheus-client's ``MutexValue`` interface, without the lock (module docstring)."""

    __slots__ = ("_exemplar", "value")
    _multiprocess = False

    def __init__(self, value: float = 0.0, exemplar: Any = None) -> None:
        self.value = value
        self._exemplar = exemplar

    def inc(self, amount: float = 1.0) -> None:
        self.value += amount

    def dec(self, amount: float = 1.0) -> None:
        self.value -= amount

    def set(self, value: float, timestamp: float | None = None) -> None:
        self.value = value

    def set_exemplar(self, exemplar: Any) -> None:
        self._exemplar = exemplar

    def get(self) -> float:
        return self.value

    def get_exemplar(self) -> Any:
        return self._exemplar


def _unlocked(value: Any) -> LoopValue:
    """``value`` (a series' value object) as a :class:`LoopValue` with the same contents."""
    if isinstance(value, LoopValue):
        return value
    return LoopValue(value.get(), value.get_exemplar())


def counter(child: Counter) -> LoopValue:
    """The value of a counter series (a label child, or a counter without labels)."""
    value = child._value = _unlocked(child._value)
    return value


def gauge(child: Gauge) -> LoopValue:
    """The value of a gauge series (``inc()``, ``dec()``)."""
    value = child._value = _unlocked(child._value)
    return value


class LoopHistogram:
    """A histogram series' sum and buckets, observed without a lock."""

    __slots__ = ("_bounds", "_buckets", "_child", "_sum")

    def __init__(self, child: Histogram) -> None:
        # Swapped once, at bind: the registry reads the same objects at a scrape.
        child._sum = _unlocked(child._sum)
        child._buckets = [_unlocked(bucket) for bucket in child._buckets]
        self._child = child
        self._sum = child._sum
        self._buckets = tuple(child._buckets)
        self._bounds = tuple(child._upper_bounds)

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        """One observation: the sum, and the first bucket whose bound is ``>= amount`` (the
        last bound is +Inf). With an exemplar, prometheus-client's own ``observe`` (it checks
        and stamps it) on the same unlocked values."""
        if exemplar:
            self._child.observe(amount, exemplar)
            return
        self._sum.value += amount
        bounds = self._bounds
        index = bisect_left(bounds, amount)
        if amount <= bounds[index]:  # false only for NaN, in no bucket (as prometheus-client)
            self._buckets[index].value += 1


def histogram(child: Histogram) -> LoopHistogram:
    """A histogram series (a label child) for :meth:`LoopHistogram.observe`."""
    return LoopHistogram(child)
