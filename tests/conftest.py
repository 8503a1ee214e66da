"""Suite-wide settings.

``MCP_GATEWAY_TEST_REQUIRE`` (set by ``.ci/run``) names external tools the run must have, e.g.
``"redis-server nginx promtool chromium oidc-provider"`` (the last an npm package under
``tests/interop/``, found once installed there). Without it, tests that need a missing tool skip
with the reason (a developer's laptop); with it, the session refuses to start, so CI can never
pass on skipped tests.

``MCP_GATEWAY_COMPILED=1`` (``.ci/run``'s compiled step) tests the *installed* ``gateway``
package, the mypyc-compiled wheel, instead of the source tree: pytest's ``pythonpath`` and the
rootdir of the ``tests`` package put the checkout first on ``sys.path``, which would shadow the
installed package; this moves the checkout to the end (``tests.support`` still imports from it)
and refuses to start when ``gateway`` still comes from the checkout.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
_INSTALLED = os.environ.get("MCP_GATEWAY_COMPILED") == "1"
if _INSTALLED:  # before anything imports gateway
    _tree = [entry for entry in sys.path if Path(entry or os.curdir).resolve() == _CHECKOUT]
    sys.path[:] = [entry for entry in sys.path if entry not in _tree] + _tree
    # Child processes (`python -m gateway.cli` with the checkout as working directory) too:
    # without the working directory first on their path they import the installed package.
    os.environ["PYTHONSAFEPATH"] = "1"
    # Imported now, while the installed package comes first: pytest puts the checkout back in
    # front for every test module it imports, but gateway.* then resolves through this
    # package's __path__, not sys.path.
    import gateway  # noqa: F401

import pytest  # noqa: E402
import structlog  # noqa: E402

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
    if _INSTALLED:
        import gateway

        origin = Path(gateway.__file__ or "").resolve()
        if origin.is_relative_to(_CHECKOUT / "gateway"):
            raise pytest.UsageError(
                f"MCP_GATEWAY_COMPILED=1 but gateway is imported from the checkout ({origin}); "
                "run the suite with the venv that has the compiled wheel installed"
            )
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
