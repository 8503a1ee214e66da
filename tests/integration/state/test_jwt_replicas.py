"""Both token kinds across replicas sharing one Redis: revocation and the shared cache.

Two ``mcp-gateway serve`` processes in front of the development issuer in JWT mode: a JWT
validated locally on both replicas is refused on both once revoked at one of them (the revoked
marker is checked for local validation as for introspection, and the broadcast evicts it from
every cache); with ``jwt+introspection`` and ``state.share_token_cache`` one introspection
serves both replicas, while ``tokens: jwt`` results are never written to Redis.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.support.redis_server import RedisServer, redis_server
from tests.support.replicas import SHARED_JWT_INTROSPECTION, replica_stack

pytestmark = pytest.mark.slow

__all__ = ["redis_server"]  # the fixture, imported for pytest

JWT_ONLY = {"issuer": {"tokens": "jwt", "client_id": None, "client_secret": None}}


async def test_a_jwt_revoked_at_one_replica_is_refused_by_every_replica(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with replica_stack(
        tmp_path,
        redis_server,
        overrides={**JWT_ONLY, "state": {"share_token_cache": True}},
        issuer_options={"token_format": "jwt", "introspection": False},
    ) as stack:
        a, b = stack.replicas
        token = stack.mint()
        assert token.count(".") == 2
        for replica in (a, b):  # verified locally on each, and cached there
            assert (await stack.call(replica, token, "echo", text="hi"))[0] == 200
        # Local results never go to Redis: a key set check is cheaper than a round trip.
        client = redis_server.client()
        assert not [k for k in client.keys("*") if b":tc:" in k]
        status, _ = await stack.revoke(a, {"token": token})
        assert status == 200
        deadline = time.monotonic() + 5
        while (await stack.post(b, token, "tools/list"))[0] != 401:
            assert time.monotonic() < deadline, "replica b kept accepting a revoked JWT"
            await asyncio.sleep(0.05)
        assert (await stack.post(a, token, "tools/list"))[0] == 401
        # A restarted replica (empty caches) refuses it too: the marker in Redis.
        await stack.restart(b)
        assert (await stack.post(b, token, "tools/list"))[0] == 401
        assert (await stack.post(b, stack.mint("bob"), "tools/list"))[0] == 200
        for replica in (a, b):
            log = replica.log()
            assert '"auth_method":"jwt"' in log  # the audit trail names the method
            assert token not in log and token.rsplit(".", 1)[1] not in log


async def test_jwt_plus_introspection_results_are_shared_between_replicas(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    async with replica_stack(tmp_path, redis_server, **SHARED_JWT_INTROSPECTION) as stack:
        a, b = stack.replicas
        token = stack.mint()
        before = stack.issuer.introspection_calls
        assert (await stack.post(a, token, "tools/list"))[0] == 200
        assert (await stack.post(b, token, "tools/list"))[0] == 200
        assert stack.issuer.introspection_calls - before == 1
        assert await stack.metric(b, 'mcp_gateway_token_cache_total{outcome="shared"}') == 1
        sample = 'mcp_gateway_authentications_total{auth_method="jwt+introspection"}'
        assert await stack.metric(b, sample) == 1
