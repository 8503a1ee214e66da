"""The sliding-window limiter's wait is honest: a hit retried after it is admitted.

A ``Retry-After`` that is refused again is what clients loop on; this pins the wait to the
admission rule for every history, including a window that alone is already full.
"""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.limits.memory import MemoryRateLimiter


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@settings(max_examples=300, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=6),
    gaps=st.lists(st.floats(min_value=0.0, max_value=70.0), min_size=1, max_size=25),
    start=st.floats(min_value=0.0, max_value=600.0),
)
def test_a_refused_hit_is_admitted_after_its_wait_and_not_much_before(
    count: int, gaps: list[float], start: float
) -> None:
    clock = Clock(start)
    limiter = MemoryRateLimiter(clock=clock)
    for gap in gaps:
        clock.now += gap
        wait = limiter.hit_now("k", count, 60.0)
        if wait is None:
            continue
        saved = clock.now
        if wait > 0.01:  # just before it: still refused (the wait is not padded)
            probe = copy.deepcopy(limiter)
            probe._clock = Clock(saved + wait - 0.005)
            assert probe.hit_now("k", count, 60.0) is not None
        clock.now = saved + wait + 1e-6
        assert limiter.hit_now("k", count, 60.0) is None, (count, gaps, start, wait)


def test_a_full_window_near_its_end_waits_past_it() -> None:
    # The stop-36 CI failure: three failures late in a window, the fourth refused; the old wait
    # ended with the window, where the three (now "previous") still weighed 3 and refused again.
    clock = Clock(59.5)
    limiter = MemoryRateLimiter(clock=clock)
    assert [limiter.hit_now("k", 3, 60.0) for _ in range(3)] == [None, None, None]
    wait = limiter.hit_now("k", 3, 60.0)
    assert wait is not None and wait > 20.0  # 0.5 s to the window's end + a third of the next
