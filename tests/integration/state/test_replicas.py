"""Two gateway replicas (separate processes) sharing one Redis and one issuer.

Every test starts real ``mcp-gateway serve`` processes (``tests/support/replicas.py``), a real
redis-server, the development issuer and an upstream MCP server; nothing is mocked.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.support.redis_server import RedisServer, redis_server
from tests.support.replicas import Replica, ReplicaStack, replica_stack

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
    overrides = {"issuer": {"failed_auth_rate": "3/minute"}}
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
            status, report = await readyz(stack, a)
            assert status == 200
            assert report["state"] == {"backend": "redis", "reachable": True, "error": None}
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
