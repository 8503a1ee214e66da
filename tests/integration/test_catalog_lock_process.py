"""The catalog lock with two ``mcp-gateway serve`` processes sharing one lock file (issue 33):
each replica holds an item the lock does not pin, and each reloads the file on its own SIGHUP
(``catalog.poll_s: 0``: no polling), so an approval reaches a replica when its copy is reloaded.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from gateway.backend.catalog.lock_file import write_lock
from gateway.backend.catalog.pinning import pin
from tests.integration.test_yaml_constructs_process import wait_for_event
from tests.support.replicas import Replica, ReplicaStack, replica_stack
from tests.support.upstreams import echo_tool

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sends SIGHUP"),
]
BOUND_S = 20.0


async def listed(stack: ReplicaStack, index: int) -> list[str]:
    status, body, _ = await stack.post(stack.replicas[index], stack.mint(), "tools/list")
    assert status == 200, body
    return sorted(tool["name"] for tool in body["result"]["tools"])


async def reload(replica: Replica) -> Replica:
    """SIGHUP to ``replica``, and its ``catalog.lock_reloaded`` line."""
    assert replica.process is not None
    lines = len(replica.log().splitlines())
    replica.process.send_signal(signal.SIGHUP)
    await wait_for_event(replica.log, "catalog.lock_reloaded", lines, BOUND_S)
    return replica


async def test_two_replicas_hold_what_the_shared_lock_lacks_until_each_reloads(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "catalog.lock.yaml"
    write_lock(lock, [pin("tool", "default", echo_tool("echo"), "echo")])  # "hold" not approved
    overrides = {"catalog": {"lock": "catalog.lock.yaml", "poll_s": 0}}
    async with replica_stack(tmp_path, None, overrides=overrides, hold_s=0.01) as stack:
        token = stack.mint()
        for index in (0, 1):
            assert await listed(stack, index) == ["echo"]
            status, body, _ = await stack.call(stack.replicas[index], token, "hold")
            assert status == 400 and body["error"]["code"] == -32602, body  # as if absent
            held = 'mcp_gateway_catalog_held_items{backend="default",kind="tool"}'
            assert await stack.metric(stack.replicas[index], held) == 1.0
        # Approved (the whole catalog), then SIGHUP to the first replica only.
        write_lock(lock, [pin("tool", "default", echo_tool(n), n) for n in ("echo", "hold")])
        first = await reload(stack.replicas[0])
        assert await listed(stack, 0) == ["echo", "hold"]
        assert (await stack.call(first, token, "hold"))[0] == 200
        assert await listed(stack, 1) == ["echo"]  # its copy was not reloaded yet
        await reload(stack.replicas[1])
        assert await listed(stack, 1) == ["echo", "hold"]
