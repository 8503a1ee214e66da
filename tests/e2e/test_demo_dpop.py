"""``mcp-gateway demo --dpop`` as a user runs it: the demo starts with DPoP-bound tokens on,
``demo token --dpop`` gets a token bound to the demo client's key from the development issuer
(which checks that command's proof), ``demo proof`` signs the proof of each request, and the
gateway serves the request; the same token as Bearer, or a proof used twice, is refused."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_demo_command import STOP_S, _demo_ports, running_demo
from tests.support.demo_stack import modern_body, modern_headers
from tests.support.dev_http import http_client

pytestmark = pytest.mark.slow


async def test_demo_dpop_works_end_to_end_from_the_command_line(tmp_path: Path) -> None:
    state_file = tmp_path / "demo-state.json"
    demo = running_demo(state_file, "--dpop", *_demo_ports(), "--log-level", "warning")
    with demo as run:
        state, process = run.state, run.process
        mcp_url = str(state["mcp_url"])
        dpop = state["dpop"]
        assert isinstance(dpop, dict) and "d" in dpop["key"]  # the client's key (dev only)
        ready = str(dpop["token"])
        # Issue 43: the banner's commands, run exactly as printed, find this demo's state file.
        banner = _banner(process, "  More bound tokens: ")
        minted = _shell(_after(banner, "  More bound tokens: "))
        assert len(_shell(_after(banner, "Mint other tokens:"))) >= 32
        proof_command = re.search(r'"DPoP: \$\((mcp-gateway demo proof [^)]*)\)"', banner)
        assert proof_command is not None, banner
        async with http_client() as http:
            for token in (ready, minted):
                proof = _shell(proof_command.group(1), DEMO_DPOP_TOKEN=token)
                headers = modern_headers(None, "tools/list")
                headers |= {"Authorization": f"DPoP {token}", "DPoP": proof}
                reply = await http.post(mcp_url, json=modern_body("tools/list"), headers=headers)
                assert reply.status == 200, await reply.text()
                tools = {t["name"] for t in (await reply.json())["result"]["tools"]}
                assert "notes_list" in tools
                again = await http.post(mcp_url, json=modern_body("tools/list"), headers=headers)
                assert again.status == 401, await again.text()  # the same proof twice: a replay
                assert 'error="invalid_dpop_proof"' in again.headers["WWW-Authenticate"]
                bearer = await http.post(
                    mcp_url,
                    json=modern_body("tools/list"),
                    headers=modern_headers(token, "tools/list"),
                )
                assert bearer.status == 401, await bearer.text()  # a bound token alone is useless
                body = json.loads(await bearer.text())
                assert (
                    body["error"]["message"] == "This access token must be used with a DPoP proof"
                )
            # The ready-made bearer tokens still work: dpop: allowed.
            reader = str(state["tokens"]["reader"])  # type: ignore[index]
            plain = await http.post(
                mcp_url,
                json=modern_body("tools/list"),
                headers=modern_headers(reader, "tools/list"),
            )
            assert plain.status == 200, await plain.text()
    assert f"export DEMO_DPOP_TOKEN={ready}" in banner
    # "=": a token may begin with "-", which argparse would take for an option.
    assert f"mcp-gateway demo proof --state-file {state_file} --token=$DEMO_DPOP_TOKEN" in banner


def _banner(process: subprocess.Popen[bytes], last: str) -> str:
    """The banner the running demo printed, up to the line starting with ``last`` (read from the
    pipe's descriptor: a buffered reader would hide what it read ahead from select)."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    text = ""
    deadline = time.monotonic() + STOP_S
    while "\n" + last not in text or not text.endswith("\n"):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, "the demo printed no banner:\n" + text
        chunk = os.read(fd, 65536)
        assert chunk, "the demo closed its output:\n" + text
        text += chunk.decode()
    return text


def _after(banner: str, label: str) -> str:
    """The command printed after ``label`` on its line."""
    line = next(line for line in banner.splitlines() if line.startswith(label))
    return line.removeprefix(label).strip()


def _shell(command: str, **env: str) -> str:
    """``command`` as a user pastes it into a shell, with this interpreter's scripts on PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    result = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        timeout=30,
        check=False,
        env={**os.environ, "PATH": path, **env},
    )
    assert result.returncode == 0, (command, result.stderr)
    return result.stdout.decode().strip()
