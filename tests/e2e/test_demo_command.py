"""``mcp-gateway demo`` as a user runs it: a subprocess that starts, writes its state file, serves,
mints a token through ``demo token``, and stops cleanly on Ctrl-C (SIGINT, exit code 0)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.demo_stack import modern_body, modern_headers, parse_challenge
from tests.support.dev_http import http_client
from tests.support.ports import free_port

STARTUP_S = 30.0
STOP_S = 20.0


def _demo_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "gateway.commands", "demo", *args]


def _demo_ports() -> list[str]:
    """The demo's own listeners on ports of this test worker's slice (tests/support/ports.py):
    the command would choose from the whole range, which other workers choose from too."""
    return ["--port", str(free_port()), "--vault-port", str(free_port())]


@dataclass
class DemoRun:
    process: subprocess.Popen[bytes]
    state: dict[str, object]
    stdout: str = ""
    """What it printed (after it stopped: the rest of it)."""


@contextlib.contextmanager
def running_demo(state_file: Path, *args: str) -> Iterator[DemoRun]:
    """``mcp-gateway demo ARGS --state-file STATE_FILE`` as a user runs it: started, its state
    file read, then stopped with Ctrl-C (SIGINT), which must end it with status 0."""
    process = subprocess.Popen(
        _demo_command(*args, "--state-file", str(state_file)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    stderr = b""
    try:
        run = DemoRun(process, _wait_for_state(state_file, process))
        yield run
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=STOP_S)
        run.stdout = stdout.decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr.decode(errors="replace")[-2000:]


def _wait_for_state(path: Path, process: subprocess.Popen[bytes]) -> dict[str, object]:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        assert process.poll() is None, "the demo exited during startup"
        if path.exists():
            state: dict[str, object] = json.loads(path.read_text())
            return state
        time.sleep(0.1)
    raise AssertionError("the demo never wrote its state file")


async def test_the_demo_command_starts_writes_its_state_and_stops_cleanly_on_sigint(
    tmp_path: Path,
) -> None:
    state_file = tmp_path / "demo-state.json"
    # Both backends on fixed ports (issue 32 item 9: the second one, the vault, had no flag).
    port, backend_port, vault_port = free_port(), free_port(), free_port()
    demo = running_demo(
        state_file,
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--backend-port",
        str(backend_port),
        "--vault-port",
        str(vault_port),
    )
    with demo as run:
        state = run.state
        assert set(state) >= {"mcp_url", "issuer_url", "ops_url", "tokens"}
        tokens = state["tokens"]
        assert isinstance(tokens, dict)
        assert set(tokens) == {"reader", "writer", "admin"}
        assert state_file.stat().st_mode & 0o077 == 0  # holds bearer tokens: owner-only
        mcp_url, ops_url = str(state["mcp_url"]), str(state["ops_url"])
        assert mcp_url.startswith("http://127.0.0.1:")
        assert mcp_url.endswith("/mcp")

        async with http_client() as http:
            health = await http.get(f"{ops_url}/healthz")
            assert health.status == 200
            anonymous = await http.post(
                mcp_url, json=modern_body("tools/list"), headers=modern_headers(None, "tools/list")
            )
            assert anonymous.status == 401
            assert "resource_metadata" in parse_challenge(anonymous.headers["WWW-Authenticate"])
            reader = await http.post(
                mcp_url,
                json=modern_body("tools/list"),
                headers=modern_headers(str(tokens["reader"]), "tools/list"),
            )
            assert reader.status == 200

        minted = subprocess.run(  # noqa: ASYNC221 - a short CLI call
            _demo_command(
                "token", "--scopes", "mcp:access notes:read", "--state-file", str(state_file)
            ),
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert minted.returncode == 0, minted.stderr
        assert len(minted.stdout.strip()) >= 32

    banner = run.stdout
    assert mcp_url in banner
    assert f"Backend (private) http://127.0.0.1:{backend_port}/mcp" in banner
    assert f"http://127.0.0.1:{vault_port}/" in banner
    assert "claude mcp add --transport http demo" in banner
    assert "[mcp_servers.demo]" in banner
    assert "bearer_token_env_var" in banner


def test_make_demo_passes_demo_args_to_the_command() -> None:
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        ["make", "-n", "demo", "DEMO_ARGS=--port 8090 --vault-port 9100"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert ".venv/bin/mcp-gateway demo --port 8090 --vault-port 9100" in result.stdout.splitlines()


def test_demo_token_without_a_running_demo_fails_with_a_clear_message(tmp_path: Path) -> None:
    result = subprocess.run(
        _demo_command(
            "token", "--scopes", "mcp:access", "--state-file", str(tmp_path / "none.json")
        ),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert b"no running demo state" in result.stderr


def test_a_non_loopback_host_is_refused_without_the_force_flag() -> None:
    result = subprocess.run(
        _demo_command("--host", "0.0.0.0", "--port", "0"),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert b"loopback" in result.stderr
