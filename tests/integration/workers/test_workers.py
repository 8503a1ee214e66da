"""``mcp-gateway serve --workers 2``: a supervisor and two worker processes, for real.

Each test starts the real command (``tests/support/replicas.py`` with ``--workers 2``), the
development issuer and an upstream MCP server, and talks to the group the way clients and
operators do: the public port (each call on a fresh connection, so the kernel's SO_REUSEPORT
balancing spreads them), the group's ops listener, signals to the supervisor. Each worker's
private ops socket (in the runtime directory the supervisor logs) shows what that worker did.
Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest

from tests.support.jwt_forge import respell_ecdsa
from tests.support.redis_server import RedisServer, redis_server
from tests.support.replicas import META, MODERN, Replica, ReplicaStack, replica_stack

pytestmark = pytest.mark.slow

__all__ = ["redis_server"]

WORKERS: Final = ("--workers", "2")
WAIT_S: Final = 20.0
POLICY: Final = """version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: []}
  hold: {scopes: []}
"""


@contextlib.asynccontextmanager
async def group(
    tmp_path: Path,
    redis: RedisServer | None = None,
    *,
    overrides: dict[str, Any] | None = None,
    hold_s: float = 1.0,
    policy: str = POLICY,
    issuer_options: dict[str, Any] | None = None,
) -> AsyncIterator[ReplicaStack]:
    async with replica_stack(
        tmp_path,
        redis,
        replicas=1,
        serve_args=WORKERS,
        overrides=overrides,
        hold_s=hold_s,
        policy=policy,
        issuer_options=issuer_options,
    ) as stack:
        yield stack


async def fresh_call(
    stack: ReplicaStack, token: str, tool: str = "echo", **arguments: Any
) -> tuple[int, Any]:
    """One tools/call on a connection of its own (a new 4-tuple for SO_REUSEPORT to hash)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
        "Authorization": f"Bearer {token}",
        "Connection": "close",
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": META},
    }
    replica = stack.replicas[0]
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session,
        session.post(replica.mcp_url, json=body, headers=headers) as response,
    ):
        text = await response.text()
        return response.status, json.loads(text) if text else None


async def ops(stack: ReplicaStack, path: str) -> tuple[int, Any]:
    async with stack.session.get(stack.replicas[0].ops_url + path) as response:
        text = await response.text()
        return response.status, json.loads(text) if path != "/metrics" else text


async def worker_pids(stack: ReplicaStack) -> list[int | None]:
    _, body = await ops(stack, "/readyz")
    return [entry["pid"] for entry in body["workers"]]


def runtime_dir(replica: Replica) -> Path:
    for line in replica.log().splitlines():
        if '"supervisor.started"' in line:
            return Path(json.loads(line)["runtime_dir"])
    raise AssertionError("no supervisor.started line")


async def worker_metrics(replica: Replica, slot: int) -> str:
    """Worker ``slot``'s own exposition, from its private socket."""
    path = runtime_dir(replica) / f"worker-{slot}.sock"
    async with (
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(str(path))) as session,
        session.get("http://worker/metrics") as response,
    ):
        assert response.status == 200
        return await response.text()


def sample(exposition: str, name: str) -> float:
    for line in exposition.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


CALLS_OK: Final = 'mcp_gateway_requests_total{decision="allow",method="tools/call",status="200"}'


async def until(predicate: Any, what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = await predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def wait_exit(replica: Replica, timeout_s: float = WAIT_S) -> int:
    assert replica.process is not None
    return replica.process.wait(timeout=timeout_s)


def log_lines(replica: Replica) -> list[dict[str, Any]]:
    lines = []
    for line in replica.log().splitlines():
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if isinstance(doc, dict):
                lines.append(doc)
    return lines


# --- serving ---------------------------------------------------------------------------------


async def test_both_workers_serve_and_one_scrape_sums_them(tmp_path: Path) -> None:
    async with group(tmp_path) as stack:
        replica = stack.replicas[0]
        status, ready = await ops(stack, "/readyz")
        assert status == 200 and ready["status"] == "ready"
        pids = [entry["pid"] for entry in ready["workers"]]
        assert len(set(pids)) == 2 and replica.process is not None
        assert replica.process.pid not in pids  # the supervisor is not a worker
        assert ready["checks"] == {"issuer": True, "backend_catalog": True}
        assert ready["backends"]["default"]["ready"] is True
        assert ready["backends"]["default"]["tools"] == 2
        assert [issuer["ready"] for issuer in ready["issuers"]] == [True]
        assert ready["policy_version"] == ready["workers"][0]["policy_version"]

        token = stack.mint()
        calls = 24
        for _ in range(calls):
            status, body = await fresh_call(stack, token, text="hi")
            assert status == 200, body
        own = [sample(await worker_metrics(replica, slot), CALLS_OK) for slot in (0, 1)]
        assert sum(own) == calls
        assert min(own) > 0, f"the kernel gave every connection to one worker: {own}"

        _, text = await ops(stack, "/metrics")
        assert sample(text, CALLS_OK) == calls
        assert sample(text, "mcp_gateway_workers") == 2
        assert sample(text, "mcp_gateway_workers_running") == 2
        assert sample(text, "mcp_gateway_max_in_flight") == 2 * 256  # each worker's cap
        ok = 'mcp_gateway_backend_requests_total{backend="default",outcome="ok",tool="echo"}'
        assert sample(text, ok) == calls
        # Each worker introspected the token once (caches are per worker).
        assert sample(text, 'mcp_gateway_introspection_total{result="active"}') == 2
        assert stack.issuer.introspection_calls == 2
        # Same families as a single gateway's, plus the supervisor's three.
        single = await worker_metrics(replica, 0)
        names = {line.split()[2] for line in single.splitlines() if line.startswith("# TYPE")}
        group_names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
        assert group_names - names == {
            "mcp_gateway_workers",
            "mcp_gateway_workers_running",
            "mcp_gateway_worker_restarts_total",
        }
        assert names <= group_names
        # OpenMetrics on request, as for a single gateway.
        async with stack.session.get(
            replica.ops_url + "/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        ) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
            assert (await response.text()).endswith("# EOF\n")
            # The group's ops listener names the product alone too (issue 32 item 7).
            assert response.headers.getall("Server") == ["mcp-gateway"]

        lines = log_lines(replica)
        served = {line.get("worker") for line in lines if line.get("event") == "mcp.request"}
        assert served == {0, 1}
        assert token not in replica.log()


# --- stopping --------------------------------------------------------------------------------


async def test_sigterm_drains_every_worker(tmp_path: Path) -> None:
    overrides = {"limits": {"shutdown_delay_s": 1, "drain_timeout_s": 10}}
    async with group(tmp_path, overrides=overrides, hold_s=3.0) as stack:
        replica = stack.replicas[0]
        token = stack.mint()
        calls: list[asyncio.Task[tuple[int, Any]]] = []

        async def both_busy() -> bool:
            if len(calls) < 32:
                calls.append(asyncio.create_task(fresh_call(stack, token, "hold", text="slow")))
            await asyncio.sleep(0.1)
            busy = [
                sample(await worker_metrics(replica, slot), "mcp_gateway_in_flight")
                for slot in (0, 1)
            ]
            return min(busy) >= 1

        await until(both_busy, "a slow call in flight on each worker")
        assert replica.process is not None
        replica.process.send_signal(signal.SIGTERM)
        # Not ready at once, while the public port still serves during the shutdown delay.
        status, body = await until(lambda: _draining(stack), "the group's /readyz to fail", 2.0)
        assert status == 503 and body["status"] == "draining"
        assert (await fresh_call(stack, token, text="during the delay"))[0] == 200

        answers = await asyncio.gather(*calls)
        assert [status for status, _ in answers] == [200] * len(calls)
        assert all(body["result"].get("isError") is not True for _, body in answers)
        assert await asyncio.to_thread(wait_exit, replica) == 0
        events = [(line.get("event"), line.get("worker")) for line in log_lines(replica)]
        for slot in (0, 1):
            assert ("gateway.stop_accepting", slot) in events
            assert ("gateway.stopped", slot) in events
        assert ("supervisor.stopped", None) in events


async def _draining(stack: ReplicaStack) -> tuple[int, Any] | None:
    status, body = await ops(stack, "/readyz")
    return (status, body) if body["status"] == "draining" else None


async def test_a_second_signal_ends_every_workers_shutdown_delay(tmp_path: Path) -> None:
    overrides = {"limits": {"shutdown_delay_s": 30, "drain_timeout_s": 2}}
    async with group(tmp_path, overrides=overrides) as stack:
        replica = stack.replicas[0]
        assert replica.process is not None
        replica.process.send_signal(signal.SIGTERM)
        await until(lambda: _draining(stack), "the group's /readyz to fail", 5.0)
        started = time.monotonic()
        replica.process.send_signal(signal.SIGINT)  # Ctrl-C twice
        assert await asyncio.to_thread(wait_exit, replica) == 0
        assert time.monotonic() - started < 10.0  # not the 30 s delay
        events = [(line.get("event"), line.get("worker")) for line in log_lines(replica)]
        assert {("gateway.stop_accepting", 0), ("gateway.stop_accepting", 1)} <= set(events)


async def test_a_worker_that_outlives_its_stop_bound_is_killed_and_the_exit_says_so(
    tmp_path: Path,
) -> None:
    overrides = {"limits": {"drain_timeout_s": 1}}
    async with group(tmp_path, overrides=overrides) as stack:
        replica = stack.replicas[0]
        pids = await worker_pids(stack)
        assert pids[0] is not None and replica.process is not None
        os.kill(pids[0], signal.SIGSTOP)  # cannot act on the SIGTERM it is sent
        started = time.monotonic()
        replica.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(wait_exit, replica) == 1
        # The bound: shutdown delay (0) + drain (1 s) + 0.5 s grace + 5 s for cleanups.
        assert 6.0 <= time.monotonic() - started < 15.0
        killed = [
            line for line in log_lines(replica) if line.get("event") == "supervisor.workers_killed"
        ]
        assert killed and killed[0]["workers"] == [pids[0]]


async def test_the_workers_stop_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    async with group(tmp_path) as stack:
        replica = stack.replicas[0]
        pids = [pid for pid in await worker_pids(stack) if pid is not None]
        replica.kill()  # SIGKILL: no chance to stop its workers

        def gone() -> bool:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                alive = [pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)]
                if not alive:
                    return True
                time.sleep(0.1)
            return False

        assert await asyncio.to_thread(gone)
        assert any(line.get("event") == "worker.supervisor_gone" for line in log_lines(replica))


def _zombie(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    return True


# --- crashes ---------------------------------------------------------------------------------


async def test_a_killed_worker_is_replaced_and_no_count_is_lost(tmp_path: Path) -> None:
    async with group(tmp_path) as stack:
        replica = stack.replicas[0]
        token = stack.mint()
        for _ in range(10):
            assert (await fresh_call(stack, token, text="before"))[0] == 200
        _, before = await ops(stack, "/metrics")
        assert sample(before, CALLS_OK) == 10  # the scrape also records each worker's counts
        old = await worker_pids(stack)
        assert old[0] is not None
        os.kill(old[0], signal.SIGKILL)

        async def reaped() -> bool:
            return not await asyncio.to_thread(Path(f"/proc/{old[0]}").exists)

        # Once the kernel has closed the dead worker's socket (connections queued on it died
        # with it), the other worker answers every new connection while slot 0 restarts, and
        # the new worker takes connections only once it is ready.
        await until(reaped, "the killed worker to be reaped")
        for _ in range(5):
            assert (await fresh_call(stack, token, text="meanwhile"))[0] == 200

        async def replaced() -> bool:
            status, body = await ops(stack, "/readyz")
            pid = body["workers"][0]["pid"]
            return status == 200 and pid is not None and pid not in old

        await until(replaced, "a new worker in slot 0")
        for _ in range(5):
            assert (await fresh_call(stack, token, text="after"))[0] == 200
        _, after = await ops(stack, "/metrics")
        # Slot 0's counts before the kill are still in the sum (its last scrape was after
        # them): every call is counted once and no counter went down.
        assert sample(after, CALLS_OK) == 10 + 5 + 5
        # ... while its gauges left with it: two live workers' capacity, not three.
        assert sample(after, "mcp_gateway_max_in_flight") == 2 * 256
        assert sample(after, "mcp_gateway_worker_restarts_total") == 1
        exited = [line for line in log_lines(replica) if line.get("event") == "worker.exited"]
        assert [(line["worker"], line["pid"], line["signal"]) for line in exited] == [
            (0, old[0], "SIGKILL")
        ]


async def test_a_worker_that_keeps_dying_stops_the_supervisor(tmp_path: Path) -> None:
    async with group(tmp_path) as stack:
        replica = stack.replicas[0]
        seen: set[int] = set()
        for _ in range(6):  # one more crash than the 5 allowed within 60 s

            async def next_worker() -> int | None:
                if replica.process is not None and replica.process.poll() is not None:
                    return -1
                pid = (await worker_pids(stack))[1]
                return pid if pid is not None and pid not in seen else None

            pid = await until(next_worker, "a worker in slot 1")
            if pid == -1:
                break
            seen.add(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert await asyncio.to_thread(wait_exit, replica) == 3
        assert len(seen) == 6
        events = [line for line in log_lines(replica) if line.get("event", "").startswith("s")]
        dying = [line for line in events if line["event"] == "supervisor.workers_keep_dying"]
        assert len(dying) == 1 and dying[0]["worker"] == 1 and dying[0]["crashes"] == 6


# --- readiness and health ----------------------------------------------------------------------


async def test_ready_only_while_every_worker_is(tmp_path: Path) -> None:
    async with group(tmp_path) as stack:
        pids = await worker_pids(stack)
        assert pids[1] is not None
        os.kill(pids[1], signal.SIGSTOP)  # alive but not answering
        try:
            status, body = await ops(stack, "/readyz")
            assert status == 503 and body["status"] == "not_ready"
            assert [entry["status"] for entry in body["workers"]] == ["ready", "unresponsive"]
            status, health = await ops(stack, "/healthz")
            assert status == 503
            assert [entry["status"] for entry in health["workers"]] == ["alive", "unresponsive"]
        finally:
            os.kill(pids[1], signal.SIGCONT)
        status, body = await ops(stack, "/readyz")
        assert status == 200 and body["status"] == "ready"
        assert (await ops(stack, "/healthz"))[0] == 200


async def test_a_restarting_worker_does_not_fail_the_groups_healthz_while_it_boots(
    tmp_path: Path,
) -> None:
    # Issue 32 item 9: the new process of a restarted slot was "unresponsive" (503) until it
    # had bound its ops socket, though a restarting worker does not count against /healthz.
    async with group(tmp_path) as stack:
        old = (await worker_pids(stack))[1]
        assert old is not None
        os.kill(old, signal.SIGKILL)

        async def noticed() -> bool:  # the supervisor reaped it (the probe before may be refused)
            return (await worker_pids(stack))[1] != old

        await until(noticed, "the supervisor to notice the exit")
        seen: list[tuple[int, str, int | None]] = []
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            status, health = await ops(stack, "/healthz")
            slot = health["workers"][1]
            seen.append((status, slot["status"], slot["pid"]))
            if slot["status"] == "alive" and slot["pid"] not in (None, old):
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError(f"slot 1 never came back: {seen[-3:]}")
        assert {status for status, _, _ in seen} == {200}, seen
        assert {state for _, state, _ in seen} <= {"alive", "restarting"}, seen
        # The window this is about was seen: the new process running, not answering yet.
        assert any(state == "restarting" and pid not in (None, old) for _, state, pid in seen)
        assert health["workers"][0]["status"] == "alive"


# --- policy reload and revocation --------------------------------------------------------------


async def test_sighup_reloads_the_policy_in_every_worker(tmp_path: Path) -> None:
    async with group(tmp_path) as stack:
        replica = stack.replicas[0]
        token = stack.mint()
        _, before = await ops(stack, "/readyz")
        (stack.workdir / "policy.yaml").write_text(
            "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  hold: {scopes: []}\n"
        )
        assert replica.process is not None
        replica.process.send_signal(signal.SIGHUP)

        async def reloaded() -> dict[str, Any] | None:
            _, body = await ops(stack, "/readyz")
            versions = {entry["policy_version"] for entry in body["workers"]}
            return body if versions != {before["policy_version"]} and len(versions) == 1 else None

        after = await until(reloaded, "every worker on the new policy")
        assert after["policy_version"] not in (None, before["policy_version"])
        # echo lost its rule: hidden and refused by whichever worker answers.
        for _ in range(8):
            status, body = await fresh_call(stack, token, text="hi")
            assert status == 400 and body["error"]["code"] == -32602, body
        _, text = await ops(stack, "/metrics")
        assert sample(text, 'mcp_gateway_policy_reloads_total{result="success"}') == 2
        assert f'mcp_gateway_policy_info{{version="{after["policy_version"]}"}} 1.0' in text


async def test_a_revocation_reaches_every_worker_and_a_restarted_one(tmp_path: Path) -> None:
    async with group(tmp_path) as stack:
        token = stack.mint()
        for _ in range(12):  # cached on both workers
            assert (await fresh_call(stack, token, text="hi"))[0] == 200
        status, body = await stack.revoke(stack.replicas[0], {"token": token})
        assert status == 200 and body["revoked"] == "this_replica", body
        for _ in range(12):
            assert (await fresh_call(stack, token, text="hi"))[0] == 401
        # A worker started after the revocation refuses the token too (its cache is empty:
        # without the supervisor's list it would introspect and accept it).
        old = await worker_pids(stack)
        for pid in old:
            assert pid is not None
            os.kill(pid, signal.SIGKILL)

        async def replaced() -> bool:
            status, body = await ops(stack, "/readyz")
            pids = [entry["pid"] for entry in body["workers"]]
            return status == 200 and not set(pids) & set(old)

        await until(replaced, "two new workers")
        for _ in range(8):
            assert (await fresh_call(stack, token, text="hi"))[0] == 401
        other = stack.mint("bob")
        assert (await fresh_call(stack, other, text="hi"))[0] == 200
        audit = [line for line in log_lines(stack.replicas[0]) if line.get("log") == "audit"]
        assert [line["event"] for line in audit].count("token_revoked") == 1
        assert token not in stack.replicas[0].log()


@pytest.mark.parametrize("with_redis", [False, True], ids=["memory", "redis"])
async def test_a_group_revokes_every_spelling_of_a_jwt_until_its_exp(
    redis_server: RedisServer, tmp_path: Path, with_redis: bool
) -> None:
    """Issue 32 items 1 and 8 through the group's admin API: revoking the re-spelled (r, n-s)
    form of an ES256 token refuses both forms on every worker, past ``revocation_ttl_s``."""
    overrides = {
        "issuer": {
            "tokens": "jwt",
            "client_id": None,
            "client_secret": None,
            "cache": {"max_ttl_s": 1},
        },
        "admin": {"revocation_ttl_s": 2},
    }
    async with group(
        tmp_path,
        redis_server if with_redis else None,
        overrides=overrides,
        issuer_options={"token_format": "jwt", "introspection": False},
    ) as stack:
        stack.issuer.keys.use(stack.issuer.keys.add("EC"))
        token = stack.mint(ttl_s=600)
        other = respell_ecdsa(token)
        for _ in range(8):
            assert [(await fresh_call(stack, t, text="hi"))[0] for t in (token, other)] == [200] * 2
        status, body = await stack.revoke(stack.replicas[0], {"token": other})
        assert status == 200, body
        exp = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "==="))["exp"]
        until = datetime.fromisoformat(body["until"].replace("Z", "+00:00")).timestamp()
        assert abs(until - (exp + 30)) <= 1  # exp + clock_skew_s, not now + 2 s
        await asyncio.sleep(2.5)  # past admin.revocation_ttl_s
        for _ in range(8):
            assert [(await fresh_call(stack, t, text="hi"))[0] for t in (token, other)] == [401] * 2


async def test_a_revocation_with_redis_state_reaches_every_worker(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with group(tmp_path, redis_server) as stack:
        token = stack.mint()
        for _ in range(12):
            assert (await fresh_call(stack, token, text="hi"))[0] == 200
        status, body = await stack.revoke(stack.replicas[0], {"token": token})
        assert status == 200 and body["revoked"] == "all_replicas", body
        for _ in range(12):
            assert (await fresh_call(stack, token, text="hi"))[0] == 401
