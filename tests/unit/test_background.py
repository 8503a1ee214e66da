"""The one background-task owner (gateway/background.py): one task however often started, and close
cancels it and returns only after its cleanup ran, whatever the task ended with."""

from __future__ import annotations

import asyncio

from gateway.background import Background


async def test_start_runs_one_task_and_close_waits_for_its_cleanup() -> None:
    started, cleaned = asyncio.Event(), []

    async def work() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cleaned.append(True)

    owner = Background("test-work")
    owner.start(work)
    owner.start(work)  # already started: no second task
    await started.wait()
    assert owner.started
    assert [t.get_name() for t in asyncio.all_tasks()].count("test-work") == 1
    await owner.close()
    assert cleaned == [True] and not owner.started
    await owner.close()  # closed: nothing to do


async def test_a_task_that_failed_does_not_fail_close_and_it_can_start_again() -> None:
    runs: list[int] = []

    async def failing() -> None:
        runs.append(1)
        raise RuntimeError("boom")

    owner = Background("test-failing")
    owner.start(failing)
    await asyncio.sleep(0)
    await owner.close()
    owner.start(failing)
    await asyncio.sleep(0)
    await owner.close()
    assert runs == [1, 1]


async def test_close_without_start_is_a_no_op() -> None:
    await Background("never").close()
