"""Debian's Chromium, driven by playwright, for the tests that need a real browser.

The browser is the system's (``/usr/bin/chromium``); playwright never downloads one. Without it
(or without playwright) the tests skip with the reason; ``.ci/run`` installs chromium and sets
``MCP_GATEWAY_TEST_REQUIRE``, and then a missing piece fails the tests instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "chromium_context", "needs_chromium"]

CHROMIUM: Final = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS: Final = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _skip_reason() -> str | None:
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    if not Path(CHROMIUM).exists():
        return "chromium is not installed (apt-get install chromium); .ci/run installs it"
    return None


# Required (.ci/run): no skip, a missing piece fails the test instead.
_REQUIRED = "chromium" in os.environ.get("MCP_GATEWAY_TEST_REQUIRE", "").split()
needs_chromium: Final = [
    pytest.mark.slow,
    pytest.mark.skipif(not _REQUIRED and _skip_reason() is not None, reason=_skip_reason() or ""),
]
"""The ``pytestmark`` of a module whose tests drive the browser."""


@contextlib.asynccontextmanager
async def chromium_context() -> AsyncIterator[Any]:
    """A fresh persistent browser context (its own profile: no cookies from elsewhere)."""
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        async with async_playwright() as driver:
            context = await driver.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            try:
                yield context
            finally:
                await context.close()
