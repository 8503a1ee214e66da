"""Suite-wide settings.

``MCP_GATEWAY_TEST_REQUIRE`` (set by ``.ci/run``) names external tools the run must have, e.g.
``"redis-server nginx promtool chromium oidc-provider"`` (the last an npm package under
``tests/interop/``, found once installed there). Without it, tests that need a missing tool skip
with the reason (a developer's laptop); with it, the session refuses to start, so CI can never
pass on skipped tests.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

_NPM_TOOLS = {
    "oidc-provider": Path(__file__).parent / "interop" / "oidc-provider",
    "@modelcontextprotocol/conformance": Path(__file__).parent / "interop" / "conformance",
}
"""npm packages the tests run with node: found when ``npm ci --prefix <dir>`` installed them."""


def _found(tool: str) -> bool:
    if tool in _NPM_TOOLS:
        installed = _NPM_TOOLS[tool] / "node_modules" / tool / "package.json"
        return shutil.which("node") is not None and installed.exists()
    return shutil.which(tool) is not None or Path("/usr/sbin", tool).exists()


def pytest_configure(config: pytest.Config) -> None:
    required = os.environ.get("MCP_GATEWAY_TEST_REQUIRE", "").split()
    missing = [tool for tool in required if not _found(tool)]
    if missing:
        raise pytest.UsageError(
            f"MCP_GATEWAY_TEST_REQUIRE names tools that are not installed: {' '.join(missing)}"
        )


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Undo what the test did to structlog's configuration and the root logger (``main()`` and
    ``configure()`` set both once per process). Modules that need it name it in ``pytestmark``."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.configure(**saved)
    root.handlers[:] = handlers
    root.setLevel(level)
