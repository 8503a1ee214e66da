"""``event_loop`` / ``--event-loop``: uvloop when installed, the stdlib loop as the fallback."""

from __future__ import annotations

import asyncio
import sys

import pytest

from gateway.app.event_loop import UvloopMissing, loop_factory, loop_name, run


async def _name() -> str:
    return loop_name()


def test_auto_and_uvloop_run_on_uvloop_when_it_is_installed() -> None:
    pytest.importorskip("uvloop")
    assert run(_name(), "auto") == "uvloop"
    assert run(_name(), "uvloop") == "uvloop"


def test_asyncio_runs_on_the_standard_library_loop() -> None:
    assert loop_factory("asyncio") is None
    assert run(_name(), "asyncio") == "asyncio"


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop -> ImportError
    assert loop_factory("auto") is None
    assert run(_name(), "auto") == "asyncio"
    with pytest.raises(UvloopMissing, match="not installed"):
        loop_factory("uvloop")
    asyncio.set_event_loop_policy(None)
