"""The login surface's records in Redis (gateway/state/browser_records.py), on a real
redis-server: two stores stand for two replicas. A pending action is created once (SET NX),
handed to its owner only, and redeemed once however many replicas race for it; a mark is set
once; both expire."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from gateway.state.browser_records import RedisBrowserState
from gateway.state.store import RedisStore
from tests.integration.state.test_redis_limits import store_for
from tests.support.redis_server import RedisServer, redis_server, unique_prefix

__all__ = ["redis_server"]


@pytest.fixture
async def two_replicas(
    redis_server: RedisServer,
) -> AsyncIterator[tuple[RedisBrowserState, RedisBrowserState, RedisStore]]:
    prefix = unique_prefix()
    a, b = store_for(redis_server.url, prefix), store_for(redis_server.url, prefix)
    try:
        yield RedisBrowserState(a), RedisBrowserState(b), a
    finally:
        await a.close()
        await b.close()


async def test_a_pending_action_is_its_owners_once_across_replicas(
    two_replicas: tuple[RedisBrowserState, RedisBrowserState, RedisStore],
) -> None:
    a, b, _ = two_replicas
    until = time.time() + 60
    assert await a.put("rec", b"owner", b"body", until)
    assert not await b.put("rec", b"intruder", b"theirs", until)  # never overwritten
    assert (await b.read("rec", b"intruder", take=True)).found == "foreign"
    peeked = await b.read("rec", b"owner", take=False)
    assert (peeked.found, peeked.body) == ("owned", b"body")
    racers = [replica.read("rec", b"owner", take=True) for replica in (a, b) * 10]
    found = [lookup.found for lookup in await asyncio.gather(*racers)]
    assert found.count("owned") == 1 and found.count("missing") == 19


async def test_records_and_marks_expire_in_redis(
    two_replicas: tuple[RedisBrowserState, RedisBrowserState, RedisStore],
) -> None:
    a, b, store = two_replicas
    now = time.time()
    assert await a.put("short", b"o", b"b", now + 0.2)
    assert await a.mark("state", now + 0.2)
    assert not await b.mark("state", now + 0.2)  # the second use, at another replica
    assert await b.marked("state")
    keys = await store.client.keys(store.key("login", "*"))
    assert sorted(k.decode().rsplit(":", 2)[-2] for k in keys) == ["mark", "pending"]
    # Redis expires both itself, at the record's instant (PEXPIREAT / PXAT).
    for kind, key in (("pending", "short"), ("mark", "state")):
        ttl = await store.client.pttl(store.key("login", kind, key))
        assert 0 < ttl <= 250, (kind, ttl)
