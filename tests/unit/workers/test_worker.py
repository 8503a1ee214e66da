"""Worker-side pieces of ``serve --workers N``: the early SIGHUP, the revocations file."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

from gateway.app import Services
from gateway.workers.runtime import REVOCATIONS_FILE, read_revocations, write_revocations
from gateway.workers.worker import EarlyHangup, _catch_up_hangup


async def test_a_sighup_before_the_reload_handler_neither_kills_nor_is_lost() -> None:
    previous = signal.getsignal(signal.SIGHUP)
    hangup = EarlyHangup()
    hangup.install()
    try:
        os.kill(os.getpid(), signal.SIGHUP)  # the default action would end this process
        await asyncio.sleep(0.01)
        assert hangup.pending
        reloads: list[int] = []
        await _catch_up_hangup(hangup, Services(reload_policy=lambda: reloads.append(1)))
        assert reloads == [1]
        assert not hangup.pending
        await _catch_up_hangup(hangup, Services(reload_policy=lambda: reloads.append(1)))
        assert reloads == [1]  # nothing pending: no extra reload
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_the_revocations_file_keeps_live_entries_only(tmp_path: Path) -> None:
    assert read_revocations(tmp_path) == {}  # not written yet
    now = time.time()
    live, ended = b"\x01" * 32, b"\x02" * 32
    write_revocations(tmp_path, {live: now + 600, ended: now - 1})
    assert read_revocations(tmp_path) == {live: now + 600}
    assert not (tmp_path / (REVOCATIONS_FILE.rsplit(".", 1)[0] + ".tmp")).exists()
    doc = json.loads((tmp_path / REVOCATIONS_FILE).read_text())
    doc["zz-not-hex"] = now + 600
    doc["aa"] = "later"
    (tmp_path / REVOCATIONS_FILE).write_text(json.dumps(doc))
    assert read_revocations(tmp_path) == {live: now + 600}
