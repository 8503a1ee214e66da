"""The external tools the suite drives: ``.ci/run`` installs and requires every one, the README
names each with its Debian package, and a run that lacks some says which and how to install
them (issue 43: a README-following ``make test`` skipped 14 tests without a word)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import TOOLS

ROOT = Path(__file__).resolve().parents[2]
CI_RUN = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_ci_installs_and_requires_every_tool_and_the_readme_names_each() -> None:
    installs = re.search(r"declare -A packages=\((.*?)\)\n", CI_RUN, re.DOTALL)
    assert installs is not None
    packages = dict(re.findall(r"\[([\w-]+)\]=([\w-]+)", installs.group(1)))
    debian = {package for needed in TOOLS.values() for package in needed.split()}
    assert set(packages.values()) == debian
    required = re.search(r'^export MCP_GATEWAY_TEST_REQUIRE="([^"]*)"$', CI_RUN, re.MULTILINE)
    assert required is not None and set(required.group(1).split()) == set(TOOLS)
    assert f"apt-get install -y {' '.join(sorted(debian, key=list(packages.values()).index))}" in (
        README
    )
    for tool, needed in TOOLS.items():
        if tool in packages:  # the npm packages have their row under node, npm
            assert f"| `{tool}` | `{needed}` |" in README, tool
    assert f"`{required.group(1)}`" in README
    assert "\n\tnpm ci --prefix" not in CI_RUN  # make test installs them (make interop)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^test: check interop$", makefile, re.MULTILINE)


def test_a_run_without_some_tools_names_them_and_the_command_that_installs_them(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MCP_GATEWAY_TEST_REQUIRE"}
    env["PATH"] = str(tmp_path)  # nothing on it: node, redis-server, chromium, promtool
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "tests/unit/test_b64url.py",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    said = [
        "not installed, so their tests skip: redis-server, promtool, chromium, oidc-provider, "
        "@modelcontextprotocol/conformance",
        "install: apt-get install -y redis-server prometheus chromium nodejs npm",
        "then `make test` installs the npm packages (npm ci in tests/interop/*)",
    ]
    assert "\n".join(said) in result.stdout
    last = result.stdout.splitlines()[-1]
    assert re.fullmatch(r"\d+ passed.* in .*", last), last  # still the runner's closing line
