"""Restart back-off and when a worker "keeps dying" (gateway/workers/slot.py)."""

from __future__ import annotations

from gateway.workers.slot import RestartPolicy, Slot


def test_the_back_off_doubles_and_the_sixth_crash_within_the_window_gives_up() -> None:
    slot = Slot(0, "/nonexistent")
    delays = [slot.record_crash(now=100.0 + i) for i in range(6)]
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, None]


def test_crashes_older_than_the_window_are_forgotten() -> None:
    slot = Slot(0, "/nonexistent")
    for i in range(5):
        assert slot.record_crash(now=float(i)) is not None
    # 60 s after the first crash it no longer counts: the next one is the 5th in the window.
    assert slot.record_crash(now=60.0) == 1.6
    # A worker that ran for a minute starts over with the shortest delay.
    assert slot.record_crash(now=200.0) == 0.1


def test_the_back_off_is_capped() -> None:
    policy = RestartPolicy(max_crashes=20, window_s=600.0, initial_backoff_s=1.0, max_backoff_s=5.0)
    slot = Slot(0, "/nonexistent", policy)
    assert [slot.record_crash(now=float(i)) for i in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_a_slot_without_a_process_has_no_pid() -> None:
    assert Slot(3, "/nonexistent").pid is None
