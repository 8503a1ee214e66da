"""gateway.deadlines: asyncio.timeout_at's semantics on the hot path's own timer."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.deadlines import deadline_at


async def test_a_block_that_finishes_in_time_is_left_alone() -> None:
    with deadline_at(time.monotonic() + 5) as timer:
        await asyncio.sleep(0)
    assert not timer.expired()


async def test_a_block_past_its_deadline_raises_timeout_error() -> None:
    began = time.monotonic()
    with pytest.raises(TimeoutError), deadline_at(began + 0.05) as timer:
        await asyncio.sleep(5)
    assert timer.expired()
    assert time.monotonic() - began < 2
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_deadline_already_past_fires_at_the_next_wait() -> None:
    with pytest.raises(TimeoutError), deadline_at(time.monotonic() - 1):
        await asyncio.sleep(1)


async def test_none_is_no_deadline_and_reschedule_moves_it() -> None:
    with pytest.raises(TimeoutError), deadline_at(None) as timer:
        assert timer.when() is None
        timer.reschedule(time.monotonic() + 0.05)
        await asyncio.sleep(5)
    with deadline_at(time.monotonic() + 0.05) as later:
        later.reschedule(None)
        await asyncio.sleep(0.1)
    assert not later.expired()
    with pytest.raises(RuntimeError):
        later.reschedule(1.0)  # only while the block runs


async def test_the_inner_of_two_deadlines_that_expires_is_the_one_that_raises() -> None:
    with deadline_at(time.monotonic() + 5) as outer:
        with pytest.raises(TimeoutError), deadline_at(time.monotonic() + 0.05):
            await asyncio.sleep(5)
        await asyncio.sleep(0)  # the outer block goes on
    assert not outer.expired()
    with (
        pytest.raises(TimeoutError),
        deadline_at(time.monotonic() + 0.05) as first,
        deadline_at(time.monotonic() + 5),
    ):
        await asyncio.sleep(5)
    assert first.expired()


async def test_a_cancellation_from_elsewhere_stays_a_cancellation() -> None:
    started = asyncio.Event()

    async def body() -> None:
        with deadline_at(time.monotonic() + 0.05):
            started.set()
            await asyncio.sleep(5)

    task = asyncio.ensure_future(body())
    await started.wait()
    task.cancel()  # before the deadline: not a timeout
    with pytest.raises(asyncio.CancelledError):
        await task

    async def both() -> None:
        with deadline_at(time.monotonic() + 0.05):
            try:
                await asyncio.sleep(5)
            finally:
                asyncio.current_task().cancel()  # type: ignore[union-attr]
                await asyncio.sleep(0)

    with pytest.raises(asyncio.CancelledError):  # expired and also cancelled: cancelled wins
        await asyncio.ensure_future(both())


def test_outside_a_task_it_refuses_and_a_new_loop_is_found() -> None:
    with pytest.raises(RuntimeError), deadline_at(None):
        pass

    async def once() -> bool:
        with pytest.raises(TimeoutError), deadline_at(time.monotonic() + 0.01):
            await asyncio.sleep(1)
        return True

    # Each asyncio.run is a new loop: the remembered one is not running the current task.
    assert asyncio.run(once()) and asyncio.run(once())
