"""The one file watcher: a value read from files, read again when their stat signature changes
(imports nothing from the gateway, so every layer may use it). The policy files and the catalog
lock are watched by it.

* **Signature**: :func:`stat_signature`, (path, mtime_ns, size, inode) per path, ``-1`` for one
  that cannot be read; ``stat`` follows symlinks, so a Kubernetes ConfigMap's swap of the
  link's target is seen. It is taken *before* reading, so a write during the read is seen at
  the next poll rather than lost.
* **Load** runs in a worker thread (parsing a large file must not stall requests); **swap**
  runs on the event loop and installs what the load returned. Both are the owner's: the load
  returns what it found (a value or its problems) without raising, the swap decides, and a
  failure keeps the old value.
* **Poll**: :meth:`FileWatch.run` compares the signature every ``poll_s`` seconds (cheap: stat
  calls on the loop) and reloads only on a change; an exception of the swap does not end it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Generic, TypeVar

__all__ = ["FileWatch", "Signature", "stat_signature"]

T = TypeVar("T")

Signature = tuple[tuple[str, int, int, int], ...]
"""(path, mtime_ns, size, inode) per path; -1s for a path that is missing."""


def stat_signature(paths: Iterable[Path]) -> Signature:
    """The signature of ``paths`` (module docstring)."""
    out: list[tuple[str, int, int, int]] = []
    for path in paths:
        try:
            info = path.stat()
        except OSError:
            out.append((str(path), -1, -1, -1))
        else:
            out.append((str(path), info.st_mtime_ns, info.st_size, info.st_ino))
    return tuple(out)


class FileWatch(Generic[T]):
    """Reads with ``load`` (any thread) and installs with ``swap`` (the event loop) whenever
    ``signature`` changes; ``swap`` returns whether a new value went in."""

    __slots__ = ("_load", "_seen", "_signature", "_swap")

    def __init__(
        self,
        signature: Callable[[], Hashable],
        load: Callable[[], T],
        swap: Callable[[T], bool],
    ) -> None:
        self._signature = signature
        self._load = load
        self._swap = swap
        self._seen = signature()
        """The signature the last read saw (the owner's first read happened before this)."""

    def changed(self) -> bool:
        """Whether the files differ from what the last read saw."""
        return self._signature() != self._seen

    def load(self) -> T:
        """Read now (any thread), taking the signature first."""
        self._seen = self._signature()
        return self._load()

    async def reload(self) -> bool:
        """Read in a worker thread, install on the loop; True when a new value went in."""
        return self._swap(await asyncio.to_thread(self.load))

    async def run(self, poll_s: float) -> None:
        """Poll every ``poll_s`` seconds (``<= 0``: never) until cancelled."""
        if poll_s <= 0:
            return
        while True:
            await asyncio.sleep(poll_s)
            if self.changed():
                with contextlib.suppress(Exception):  # the old value stays; the next poll retries
                    await self.reload()
