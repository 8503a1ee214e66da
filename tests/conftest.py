"""Suite-wide settings.

``MCP_GATEWAY_TEST_REQUIRE`` (set by ``.ci/run``) names external tools the run must have, e.g.
``"redis-server nginx promtool chromium oidc-provider"`` (the last an npm package under
``tests/interop/``, found once installed there). Without it, tests that need a missing tool skip
with the reason (a developer's laptop); with it, the session refuses to start, so CI can never
pass on skipped tests.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import sys
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
import structlog
from structlog._config import BoundLoggerLazyProxy

from gateway.observability.logging import configure
from tests.support.ports import share_among_workers
from tests.support.printed import Printed

if TYPE_CHECKING:
    from tests.support.live_stack import MakeStack, ServerFactory

_NPM_TOOLS = {
    "oidc-provider": Path(__file__).parent / "interop" / "oidc-provider",
    "@modelcontextprotocol/conformance": Path(__file__).parent / "interop" / "conformance",
}
"""npm packages the tests run with node: found when ``npm ci --prefix <dir>`` installed them
(``make test`` does, when npm is installed)."""

TOOLS: Final = {
    "redis-server": "redis-server",
    "nginx": "nginx",
    "promtool": "prometheus",
    "chromium": "chromium",
    "oidc-provider": "nodejs npm",
    "@modelcontextprotocol/conformance": "nodejs npm",
}
"""Every external tool some tests drive, and the Debian packages that bring it (README.md, "Two
commands"; ``.ci/run`` installs and requires them all). Where one is missing its tests skip,
and the run's header and summary name it (:func:`pytest_report_header`)."""


def _found(tool: str) -> bool:
    if tool in _NPM_TOOLS:
        installed = _NPM_TOOLS[tool] / "node_modules" / tool / "package.json"
        return shutil.which("node") is not None and installed.exists()
    return shutil.which(tool) is not None or Path("/usr/sbin", tool).exists()


def pytest_configure(config: pytest.Config) -> None:
    share_among_workers()
    required = os.environ.get("MCP_GATEWAY_TEST_REQUIRE", "").split()
    missing = [tool for tool in required if not _found(tool)]
    if missing:
        raise pytest.UsageError(
            f"MCP_GATEWAY_TEST_REQUIRE names tools that are not installed: {' '.join(missing)}"
        )


def _missing_tools() -> list[str]:
    """What a developer's run lacks of :data:`TOOLS`, and how to install it (empty when nothing
    is missing)."""
    missing = [tool for tool in TOOLS if not _found(tool)]
    if not missing:
        return []
    packages = " ".join(dict.fromkeys(TOOLS[tool] for tool in missing))
    lines = [
        f"not installed, so their tests skip: {', '.join(missing)}",
        f"install: apt-get install -y {packages}",
    ]
    if any(tool in _NPM_TOOLS for tool in missing):
        lines.append("then `make test` installs the npm packages (npm ci in tests/interop/*)")
    return lines


def pytest_report_header(config: pytest.Config) -> list[str]:
    return _missing_tools()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in _missing_tools():
        terminalreporter.write_line(line, yellow=True)


@pytest.fixture(autouse=True)
def _logging_left_as_found() -> Iterator[None]:
    """Whatever a test did to structlog's configuration (``configure()``, ``main()``, an
    in-process ``serve``) is undone after it: otherwise a later test on the same worker logs
    through that configuration and its ``capture_logs()`` sees nothing. Which test comes first
    depends on how the tests are spread over workers, so this cannot be left to each module."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    if structlog.get_config() != saved:
        structlog.configure(**saved)
        _forget_cached_loggers()
    if root.handlers != handlers or root.level != level:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Undo what the test did to structlog's configuration and the root logger (``main()`` and
    ``configure()`` set both once per process). Modules that need it name it in ``pytestmark``."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.configure(**saved)
    _forget_cached_loggers()
    root.handlers[:] = handlers
    root.setLevel(level)


def _forget_cached_loggers() -> None:
    """Let the gateway's module-level loggers pick up the configuration in force now.

    ``configure()`` caches each logger on first use (the proxy keeps the logger it built), so a
    logger first used under an earlier test's configuration would keep writing to that test's
    stream. Which test came first depends on how the tests are spread over workers."""
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("gateway"):
            continue
        for value in vars(module).values():
            if isinstance(value, BoundLoggerLazyProxy):
                vars(value).pop("bind", None)


@pytest.fixture
def make_stack(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> MakeStack:
    """A stack in this test's folder, with its servers and its environment: ``async with
    make_stack(upstream=..., policy=...) as stack`` (:func:`~tests.support.live_stack.live_stack`)
    or ``make_stack.of(jwt_stack, ...)``."""
    from tests.support.live_stack import MakeStack  # the gateway, imported when a test needs it

    return MakeStack(tmp_path, aiohttp_server, monkeypatch)


@pytest.fixture
def log_events() -> Iterator[list[MutableMapping[str, Any]]]:
    """Every structlog event of the test, its fixtures' too (``structlog.testing.capture_logs``
    around all of it): what the leak tests search."""
    with structlog.testing.capture_logs() as events:
        yield events


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """The production logging configuration (JSON lines, redaction) writing into a buffer, at
    debug level; restored afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    buffer = io.StringIO()
    configure("json", "debug", stream=buffer)
    # Loggers must not be cached on first use: a cached logger would keep writing into this
    # buffer in later tests and escape their capture_logs().
    structlog.configure(cache_logger_on_first_use=False)
    _forget_cached_loggers()
    yield buffer
    structlog.reset_defaults()
    _forget_cached_loggers()
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def out(capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> Printed:
    return Printed(capfd, caplog)


@pytest.fixture
def leaks(
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    log_events: list[MutableMapping[str, Any]],
) -> Printed:
    """Everywhere a leak could show: what ``out`` sees and the structlog events (``.events``,
    which then do not reach stdout)."""
    return Printed(capfd, caplog, log_events)
