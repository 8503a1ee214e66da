"""The one file watcher (gateway/filewatch.py) over real files: a change of the stat signature
reloads, the signature is taken before the read, a failed load keeps the old value, and the poll
survives a failing swap."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from gateway.filewatch import FileWatch, stat_signature


def write(path: Path, text: str, stamp: int) -> None:
    path.write_text(text)
    os.utime(path, ns=(stamp, stamp))  # an explicit mtime: no reliance on the clock's grain


class Holder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.value = path.read_text()
        self.swaps: list[str] = []
        self.watch = FileWatch(lambda: stat_signature((path,)), self.read, self.swap)

    def read(self) -> str | None:
        text = self.path.read_text()
        return None if text.startswith("bad") else text  # a load reports, never raises

    def swap(self, loaded: str | None) -> bool:
        self.swaps.append(str(loaded))
        if loaded is None or loaded == self.value:
            return False
        self.value = loaded
        return True


def test_the_signature_names_each_path_and_marks_a_missing_one(tmp_path: Path) -> None:
    write(tmp_path / "a", "x", 10**18)
    (found, missing) = stat_signature((tmp_path / "a", tmp_path / "gone"))
    assert found[:3] == (str(tmp_path / "a"), 10**18, 1)
    assert missing == (str(tmp_path / "gone"), -1, -1, -1)


async def test_a_change_reloads_and_a_bad_file_keeps_the_old_value(tmp_path: Path) -> None:
    path = tmp_path / "p"
    write(path, "one", 10**18)
    holder = Holder(path)
    assert not holder.watch.changed()
    write(path, "two", 10**18 + 1)
    assert holder.watch.changed()
    assert await holder.watch.reload() is True
    assert holder.value == "two" and not holder.watch.changed()
    write(path, "bad three", 10**18 + 2)
    assert await holder.watch.reload() is False
    assert holder.value == "two"
    assert not holder.watch.changed()  # that version was seen: no reload loop on a bad file


def test_the_signature_is_taken_before_the_read(tmp_path: Path) -> None:
    path = tmp_path / "p"
    write(path, "one", 10**18)
    holder = Holder(path)
    original = holder.read

    def read_then_written() -> str | None:
        text = original()
        write(path, "written during the read", 10**18 + 5)
        return text

    holder.watch = FileWatch(lambda: stat_signature((path,)), read_then_written, holder.swap)
    write(path, "two", 10**18 + 1)
    holder.watch.load()
    assert holder.watch.changed()  # the write during the read is seen by the next poll


async def test_the_poll_reloads_on_a_change_and_survives_a_failing_swap(tmp_path: Path) -> None:
    path = tmp_path / "p"
    write(path, "one", 10**18)
    failed, swapped = asyncio.Event(), asyncio.Event()
    calls: list[str | None] = []

    def swap(loaded: str | None) -> bool:
        calls.append(loaded)
        if len(calls) == 1:
            failed.set()
            raise RuntimeError("the owner's bug")
        swapped.set()
        return True

    watch = FileWatch(lambda: stat_signature((path,)), path.read_text, swap)
    task = asyncio.create_task(watch.run(0.01))
    write(path, "two", 10**18 + 1)
    await asyncio.wait_for(failed.wait(), 5)
    write(path, "three", 10**18 + 2)
    await asyncio.wait_for(swapped.wait(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert calls == ["two", "three"]


async def test_no_poll_below_or_at_zero(tmp_path: Path) -> None:
    path = tmp_path / "p"
    write(path, "one", 10**18)
    watch = FileWatch(lambda: stat_signature((path,)), path.read_text, lambda _: True)
    await asyncio.wait_for(watch.run(0), 1)  # returns at once
