"""The one background-task owner (gateway/background.py), by property: for any interleaving of
starts (of work that runs until cancelled, cleans up slowly, returns, or fails), closes, closes
that are themselves cancelled (a shutdown's timeout), concurrent closes and turns of the loop,
at most one task runs at a time, no close raises what a task failed with, after a close that
returned no task of the owner is running and every cancelled task's cleanup has finished, and
no failure is left for asyncio to report as never retrieved."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.background import Background

PROPERTY = settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
NAME = "property-work"
WORK = ["forever", "slow cleanup", "returns", "fails"]
steps = st.lists(
    st.tuples(st.just("start"), st.sampled_from(WORK))
    | st.tuples(st.sampled_from(["close", "two closes"]), st.just(0))
    | st.tuples(st.sampled_from(["cancelled close", "turns"]), st.integers(1, 4)),
    max_size=12,
)


class Recorder:
    def __init__(self) -> None:
        self.cleanups_pending = 0

    def work(self, kind: str) -> Callable[[], Coroutine[Any, Any, None]]:
        async def run() -> None:
            await asyncio.sleep(0)
            if kind == "returns":
                return
            if kind == "fails":
                raise RuntimeError("the loop's own failure")
            self.cleanups_pending += 1
            try:
                await asyncio.Event().wait()
            finally:
                try:
                    if kind == "slow cleanup":
                        for _ in range(3):
                            await asyncio.sleep(0)  # a cleanup that awaits (a connection's close)
                finally:
                    self.cleanups_pending -= 1

        return run


def running() -> list[asyncio.Task[Any]]:
    return [task for task in asyncio.all_tasks() if task.get_name() == NAME]


def settled(recorder: Recorder) -> None:
    assert running() == []
    assert recorder.cleanups_pending == 0


async def play(plan: list[tuple[str, Any]]) -> list[str]:
    reported: list[str] = []
    asyncio.get_running_loop().set_exception_handler(
        lambda _loop, context: reported.append(str(context.get("message")))
    )
    owner, recorder = Background(NAME), Recorder()
    for step, argument in plan:
        if step == "start":
            owner.start(recorder.work(argument))
            assert owner.started
        elif step == "close":
            await owner.close()
            settled(recorder)
        elif step == "two closes":  # two components closing at once: each waits for the end
            first = asyncio.create_task(owner.close())
            await asyncio.sleep(0)
            await owner.close()
            settled(recorder)
            await first
        elif step == "cancelled close":
            closing = asyncio.create_task(owner.close())
            for _ in range(argument):
                await asyncio.sleep(0)
            closing.cancel()
            await asyncio.gather(closing, return_exceptions=True)
        else:
            for _ in range(argument):
                await asyncio.sleep(0)
        assert len(running()) <= 1
    await owner.close()
    settled(recorder)
    assert not owner.started
    del owner  # a failure nobody retrieved is reported when its task goes
    await asyncio.sleep(0)
    return reported


@PROPERTY
@given(steps)
def test_any_interleaving_leaves_nothing_running_after_close(plan: list[tuple[str, Any]]) -> None:
    assert asyncio.run(play(plan)) == []  # no failure reported as never retrieved
