"""Two gateway replicas (separate processes) sharing one Redis and one issuer.

Every test starts real ``mcp-gateway serve`` processes (``tests/support/replicas.py``), a real
redis-server, the development issuer and an upstream MCP server; nothing is mocked.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.support.redis_server import RedisServer, redis_server
from tests.support.replicas import Replica, ReplicaStack, replica_stack

pytestmark = pytest.mark.slow

__all__ = ["redis_server"]


async def test_two_replicas_serve_the_same_token(redis_server: RedisServer, tmp_path: Path) -> None:
    async with replica_stack(tmp_path, redis_server) as stack:
        a, b = stack.replicas
        token = stack.mint()
        for replica in (a, b, a, b):
            status, body, _ = await stack.post(replica, token, "tools/list")
            assert status == 200, body
            assert [tool["name"] for tool in body["result"]["tools"]] == ["echo", "hold"]
        # Without the shared cache each replica introspects the token once.
        assert stack.issuer.introspection_calls == 2
        for replica in (a, b):
            assert token not in replica.log()


async def test_a_principal_limit_admits_exactly_n_calls_across_both_replicas(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    overrides = {"limits": {"principal_rate": "5/minute"}}
    async with replica_stack(tmp_path, redis_server, overrides=overrides) as stack:
        a, b = stack.replicas
        token = stack.mint()
        statuses = [
            (await stack.call((a, b)[i % 2], token, "echo", text="hi"))[0] for i in range(9)
        ]
        assert statuses.count(200) == 5, statuses
        assert statuses.count(429) == 4
        # Each replica refused some: the budget is one, not one per replica.
        assert {statuses[i] for i in range(5, 9, 2)} == {429}
        assert {statuses[i] for i in range(6, 9, 2)} == {429}
        status, _, headers = await stack.call(b, token, "echo", text="again")
        assert status == 429 and int(headers["Retry-After"]) >= 1
        # Another subject has its own budget.
        assert (await stack.call(a, stack.mint("bob"), "echo", text="hi"))[0] == 200


async def test_a_tool_rate_limit_and_the_pre_auth_limit_hold_across_replicas(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    policy = """version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: [], rate_limit: 3/minute}
"""
    overrides = {"limits": {"pre_auth_rate": "8/minute"}}
    async with replica_stack(tmp_path, redis_server, policy=policy, overrides=overrides) as stack:
        a, b = stack.replicas
        token = stack.mint()
        tool = [(await stack.call((a, b)[i % 2], token, "echo", text="x"))[0] for i in range(5)]
        assert tool == [200, 200, 200, 429, 429]
        # Pre-auth per client IP: 5 requests so far, 3 more are admitted in total, then 429
        # (before authentication: even without a token).
        rest = [(await stack.post((a, b)[i % 2], None, "tools/list"))[0] for i in range(5)]
        assert rest == [401, 401, 401, 429, 429]


async def test_the_failed_auth_budget_holds_across_replicas(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    # The probe interval is far longer than the test, so on a loaded machine the blocked
    # requests cannot become a replica's next probe (the first probe of each is the 4th/5th).
    overrides = {"issuer": {"failed_auth_rate": "3/minute", "failed_auth_probe_interval_s": 60}}
    async with replica_stack(tmp_path, redis_server, overrides=overrides) as stack:
        a, b = stack.replicas
        # Three refusals use the shared budget; the next refusal on each replica finds it
        # exhausted and blocks that replica for this address (with per-replica budgets each
        # replica would still have room for two more).
        refused = [(await stack.post((a, b)[i % 2], f"bad-{i}", "tools/list"))[0] for i in range(5)]
        assert refused == [401] * 5
        for replica in (a, b):
            status, _, headers = await stack.post(replica, "bad-next", "tools/list")
            assert status == 429 and int(headers["Retry-After"]) >= 1
        assert stack.issuer.introspection_calls == 5  # the blocked requests never reached it


async def readyz(stack: ReplicaStack, replica: Replica) -> tuple[int, dict[str, Any]]:
    async with stack.session.get(replica.ops_url + "/readyz") as response:
        return response.status, await response.json()


async def wait_for_store(stack: ReplicaStack, replica: Replica, reachable: bool) -> None:
    """Poll /readyz until the replica reports the store (bounded; the back-off is 1 s)."""
    for _ in range(100):
        await stack.call(replica, stack.mint("prober"), "echo", text="probe")
        if (await readyz(stack, replica))[1]["state"]["reachable"] is reachable:
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"replica {replica.name} never reported reachable={reachable}")


async def test_redis_stopped_mid_run_falls_back_locally_without_5xx_and_recovers(
    tmp_path: Path,
) -> None:
    redis = RedisServer.launch(tmp_path / "redis")
    overrides = {"limits": {"principal_rate": "4/minute"}}
    try:
        async with replica_stack(tmp_path / "stack", redis, overrides=overrides) as stack:
            a, b = stack.replicas
            # A replica reports the store as unknown (None) until its first operation on it;
            # on a loaded machine /readyz can be asked before that.
            await wait_for_store(stack, a, True)
            status, report = await readyz(stack, a)
            # The store reports None until its first answer (the subscription's, under load
            # maybe after the replica is ready): wait for it, then check the whole report.
            deadline = time.monotonic() + 10
            while report["state"]["reachable"] is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                status, report = await readyz(stack, a)
            assert status == 200
            assert report["state"] == {
                "backend": "redis",
                "reachable": True,
                "error": None,
                "shared_token_cache": False,
                "revocations": 0,
            }
            token = stack.mint()
            assert (await stack.call(a, token, "echo", text="1"))[0] == 200
            redis.stop()
            # on_store_error local (the default): each replica decides with its own counter.
            statuses = [
                (await stack.call((a, b)[i % 2], token, "echo", text="x"))[0] for i in range(10)
            ]
            assert all(s < 500 for s in statuses), statuses
            assert statuses.count(200) == 8  # 4 per replica, per-replica budgets while degraded
            for replica in (a, b):
                status, report = await readyz(stack, replica)
                assert status == 200  # an outage of Redis is not an outage of the gateway
                assert report["state"]["reachable"] is False
                assert report["state"]["error"] == "ConnectionError"
                errors = 'mcp_gateway_state_store_errors_total{kind="principal"}'
                assert await stack.metric(replica, errors) >= 5
                assert await stack.metric(replica, "mcp_gateway_state_store_up") == 0
                assert "state_store.unavailable" in replica.log()
            redis.start()
            for replica in (a, b):
                await wait_for_store(stack, replica, True)
                assert await stack.metric(replica, "mcp_gateway_state_store_up") == 1
                assert "state_store.recovered" in replica.log()
            # Shared again (this Redis kept nothing): a fresh subject gets 4 in total.
            fresh = stack.mint("carol")
            statuses = [
                (await stack.call((a, b)[i % 2], fresh, "echo", text="y"))[0] for i in range(6)
            ]
            assert statuses == [200, 200, 200, 200, 429, 429]
    finally:
        redis.destroy()


async def test_redis_stopped_with_deny_refuses_with_429_and_recovers(tmp_path: Path) -> None:
    redis = RedisServer.launch(tmp_path / "redis")
    overrides = {
        "limits": {"principal_rate": "100/minute"},
        "state": {"on_store_error": {"principal": "deny"}},
    }
    try:
        async with replica_stack(tmp_path / "stack", redis, overrides=overrides) as stack:
            a, b = stack.replicas
            token = stack.mint()
            assert (await stack.call(a, token, "echo", text="1"))[0] == 200
            redis.stop()
            for replica in (a, b):
                status, body, headers = await stack.call(replica, token, "echo", text="x")
                assert status == 429, body
                assert headers["Retry-After"] == "1"
            redis.start()
            for replica in (a, b):
                await wait_for_store(stack, replica, True)
                assert (await stack.call(replica, token, "echo", text="back"))[0] == 200
    finally:
        redis.destroy()


async def test_shared_cache_50_concurrent_first_requests_over_two_replicas_introspect_once(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    overrides = {"state": {"share_token_cache": True}}  # the harness gives Redis 3 s
    async with replica_stack(tmp_path, redis_server, overrides=overrides) as stack:
        a, b = stack.replicas
        token = stack.mint()
        before = stack.issuer.introspection_calls
        results = await asyncio.gather(
            *(stack.post((a, b)[i % 2], token, "tools/list") for i in range(50))
        )
        assert [status for status, _, _ in results] == [200] * 50
        assert stack.issuer.introspection_calls - before == 1
        # A second token, first seen on A, then on B: B reads A's result instead of asking.
        second = stack.mint("bob")
        assert (await stack.post(a, second, "tools/list"))[0] == 200
        assert (await stack.post(b, second, "tools/list"))[0] == 200
        assert stack.issuer.introspection_calls - before == 2
        assert await stack.metric(b, 'mcp_gateway_token_cache_total{outcome="shared"}') >= 1
        # Redis holds digests and principals, never a token.
        client = redis_server.client()
        for key in client.keys("*"):
            assert token.encode() not in key and second.encode() not in key
            if client.type(key) == b"string":
                assert token.encode() not in client.get(key)
        # Revoking deletes the shared entry too: a replica that never saw it still refuses it.
        status, _ = await stack.revoke(a, {"token": second})
        assert status == 200
        await stack.restart(b)
        assert (await stack.post(b, second, "tools/list"))[0] == 401


async def test_a_max_concurrency_of_one_admits_one_call_at_a_time_across_both(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    # The held call ends only when the test releases it (hold_s is a safety net), so a loaded
    # machine cannot end it before the other replica has been asked.
    async with replica_stack(tmp_path, redis_server, hold_s=30.0) as stack:
        a, b = stack.replicas
        upstream = stack.upstream
        token = stack.mint()
        first = asyncio.create_task(stack.call(a, token, "hold", text="1"))
        await asyncio.wait_for(upstream.holding.wait(), 10)
        for replica in (a, b):
            status, _, headers = await stack.call(replica, token, "hold", text="2")
            assert status == 429 and headers["Retry-After"] == "1"
        # Another subject has its own slot: its call is held beside alice's.
        bob = asyncio.create_task(stack.call(b, stack.mint("bob"), "hold", text="3"))
        deadline = time.monotonic() + 10
        while upstream.active < 2 and not bob.done():
            assert time.monotonic() < deadline, "bob's call never reached the upstream"
            await asyncio.sleep(0.02)
        assert upstream.active == 2
        upstream.released.set()
        assert (await bob)[0] == 200
        assert (await first)[0] == 200
        assert (await stack.call(b, token, "hold", text="4"))[0] == 200  # released
        assert upstream.max_active == 2  # alice's and bob's, never two of alice's


async def test_a_replica_killed_mid_call_frees_its_lease_within_its_expiry(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    overrides = {"limits": {"request_deadline_s": 1.5}}
    async with replica_stack(tmp_path, redis_server, overrides=overrides, hold_s=30.0) as stack:
        a, b = stack.replicas
        token = stack.mint()
        stuck = asyncio.create_task(stack.call(a, token, "hold", text="1"))
        await asyncio.wait_for(stack.upstream.holding.wait(), 5)
        killed_at = time.monotonic()
        a.kill()  # SIGKILL mid-call: the lease is never released
        with contextlib.suppress(aiohttp.ClientError):
            await stuck
        assert (await stack.call(b, token, "echo", text="x"))[0] == 200
        assert (await stack.call(b, token, "hold", text="2"))[0] == 429  # still held by a
        stack.upstream.hold_s = 0.0
        # The lease expires at a's deadline + grace + margin (1.5 + 0.5 + 1 s after the call).
        while (await stack.call(b, token, "hold", text="3"))[0] == 429:
            assert time.monotonic() - killed_at < 5.0, "the dead replica's lease never expired"
            await asyncio.sleep(0.1)
