"""The one file watcher (gateway/filewatch.py), by property over real files: for any sequence of
good writes, bad writes, atomic replacements, deletions, touches and polls, the value after each
poll is the last good load (a bad or missing file keeps the old value), a poll reloads exactly
when the stat signature changed since the last read, and after a poll nothing is left to reload
(a bad file is not read again and again)."""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.filewatch import FileWatch, stat_signature

PROPERTY = settings(
    max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
texts = st.text(st.characters(codec="utf-8"), max_size=12)
operations = st.lists(
    st.tuples(st.sampled_from(["good", "bad", "replace good", "replace bad"]), texts)
    | st.sampled_from([("delete", ""), ("touch", ""), ("poll", "")]),
    max_size=14,
)


@dataclass
class Owner:
    """A watcher's owner as the policy and the lock file have one: a load that reports (None
    for a missing or bad file) and a swap that installs only a good value."""

    path: Path
    value: str | None = None
    loads: int = 0
    swaps: list[bool] = field(default_factory=list)

    def load(self) -> str | None:
        self.loads += 1
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError:
            return None
        return None if text.startswith("bad") else text

    def swap(self, loaded: str | None) -> bool:
        installed = loaded is not None and loaded != self.value
        if installed:
            self.value = loaded
        self.swaps.append(installed)
        return installed


class Files:
    """Writes to one path, each with an mtime of its own (real edits are apart in time; the
    watcher's signature cannot tell two writes of one size within the clock's grain)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stamp = 10**18

    def version(self) -> int | None:
        """What the files are now, told apart by the test's own bookkeeping (not the stat
        signature under test): the stamp of the last write or touch, None when missing."""
        return self.stamp if self.path.exists() else None

    def write(self, text: str, *, atomic: bool) -> None:
        self.stamp += 1_000_000
        target = self.path.with_name("next") if atomic else self.path
        target.write_text(text, encoding="utf-8")
        os.utime(target, ns=(self.stamp, self.stamp))
        if atomic:
            os.replace(target, self.path)  # a new inode, as an editor's save or a ConfigMap swap

    def touch(self) -> None:
        if self.path.exists():
            self.stamp += 1_000_000
            os.utime(self.path, ns=(self.stamp, self.stamp))

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def good_content(self) -> str | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return None if text.startswith("bad") else text


async def play(directory: Path, steps: list[tuple[str, str]]) -> None:
    path = directory / "watched"
    files = Files(path)
    files.write("first", atomic=False)
    owner = Owner(path)
    owner.swap(owner.load())  # the owner's first read, before the watcher exists
    watch = FileWatch(lambda: stat_signature((path,)), owner.load, owner.swap)
    expected, loads, seen = "first", owner.loads, files.version()
    for step, text in [*steps, ("poll", "")]:
        if step in ("good", "replace good"):
            files.write("good " + text, atomic=step == "replace good")
        elif step in ("bad", "replace bad"):
            files.write("bad " + text, atomic=step == "replace bad")
        elif step == "delete":
            files.delete()
        elif step == "touch":
            files.touch()
        else:  # one step of FileWatch.run's poll
            if watch.changed():
                await watch.reload()
            changed, seen = files.version() != seen, files.version()
            assert owner.loads == loads + changed  # a read exactly when the files changed
            loads = owner.loads
            expected = files.good_content() or expected
            assert owner.value == expected  # the last good load; a failed one kept it
            assert not watch.changed()


@PROPERTY
@given(operations)
def test_the_value_after_any_sequence_of_writes_is_the_last_good_load(
    steps: list[tuple[str, str]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(play(Path(directory), steps))
