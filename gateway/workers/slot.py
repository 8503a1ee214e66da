"""One worker slot of the supervisor: its current process and its crash history.

A slot is restarted with exponential back-off after an unexpected exit; when it keeps dying,
the supervisor gives up (:class:`RestartPolicy`): *keep dying* means more than
``max_crashes`` unexpected exits of the same slot within ``window_s`` seconds (default: a 6th
crash within 60 s). The back-off before the k-th restart within the window is
``initial_backoff_s * 2 ** (k - 1)``, at most ``max_backoff_s`` (0.1, 0.2, 0.4, 0.8, 1.6 s), so a
worker that crashes at startup is given up on within about ten seconds, and the orchestrator's
own back-off (Kubernetes' CrashLoopBackOff, systemd's ``Restart=``) takes over from there.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Final

__all__ = ["DEFAULT_RESTART_POLICY", "RestartPolicy", "Slot"]


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    max_crashes: int = 5
    window_s: float = 60.0
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 5.0


DEFAULT_RESTART_POLICY: Final = RestartPolicy()


@dataclass(slots=True)
class Slot:
    """Worker slot ``index`` (``0 .. N-1``; a restarted worker keeps its slot and socket)."""

    index: int
    socket_path: str
    policy: RestartPolicy = DEFAULT_RESTART_POLICY
    process: asyncio.subprocess.Process | None = None
    started_at: float = 0.0
    """``time.monotonic()`` when the current process was started."""
    crashes: deque[float] = field(default_factory=deque)
    """``time.monotonic()`` of each unexpected exit within the window."""

    @property
    def pid(self) -> int | None:
        process = self.process
        return None if process is None or process.returncode is not None else process.pid

    def record_crash(self, now: float | None = None) -> float | None:
        """Count an unexpected exit; the back-off before the restart, or None: give up."""
        now = time.monotonic() if now is None else now
        policy = self.policy
        self.crashes.append(now)
        while self.crashes and self.crashes[0] <= now - policy.window_s:
            self.crashes.popleft()
        count = len(self.crashes)
        if count > policy.max_crashes:
            return None
        return float(min(policy.initial_backoff_s * 2.0 ** (count - 1), policy.max_backoff_s))
