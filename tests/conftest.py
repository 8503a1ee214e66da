"""Suite-wide settings.

``MCP_GATEWAY_TEST_REQUIRE`` (set by ``.ci/run``) names external tools the run must have, e.g.
``"redis-server nginx promtool"``. Without it, tests that need a missing tool skip with the
reason (a developer's laptop); with it, the session refuses to start, so CI can never pass on
skipped tests.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def _found(tool: str) -> bool:
    return shutil.which(tool) is not None or Path("/usr/sbin", tool).exists()


def pytest_configure(config: pytest.Config) -> None:
    required = os.environ.get("MCP_GATEWAY_TEST_REQUIRE", "").split()
    missing = [tool for tool in required if not _found(tool)]
    if missing:
        raise pytest.UsageError(
            f"MCP_GATEWAY_TEST_REQUIRE names tools that are not installed: {' '.join(missing)}"
        )
