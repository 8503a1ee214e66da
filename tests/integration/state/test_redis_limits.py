"""The Redis rate limiter and concurrency leases against a real redis-server.

Two :class:`RedisStore` instances stand for two replicas (separate connection pools); the
multi-process tests with real gateway replicas are in ``test_replicas.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.config import RedisConfig, Secret
from gateway.limits.fallback import DENY_WAIT_S, FallbackLeases, FallbackRateLimiter
from gateway.limits.memory import MemoryLeases, MemoryRateLimiter
from gateway.limits.redis import RedisLeases, RedisRateLimiter
from gateway.observability.metrics import Metrics
from gateway.state.store import RedisStore, StoreUnavailable
from tests.support.redis_server import RedisServer, redis_server, unique_prefix

__all__ = ["redis_server"]


def store_for(url: str, prefix: str, *, timeout_ms: int = 500, **kw: object) -> RedisStore:
    config = RedisConfig(
        url=Secret(url, "env:TEST_REDIS_URL"), key_prefix=prefix, timeout_ms=timeout_ms
    )
    return RedisStore(config, **kw)  # type: ignore[arg-type]


@pytest.fixture
async def two_stores(redis_server: RedisServer) -> AsyncIterator[tuple[RedisStore, RedisStore]]:
    prefix = unique_prefix()
    a, b = store_for(redis_server.url, prefix), store_for(redis_server.url, prefix)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def test_a_limit_holds_across_two_stores_exactly(
    two_stores: tuple[RedisStore, RedisStore],
) -> None:
    a, b = (RedisRateLimiter(store) for store in two_stores)
    results = [await (a if i % 2 else b).hit("sub:alice", 5, 60.0) for i in range(8)]
    assert results[:5] == [None] * 5
    waits = results[5:]
    # The rest of the full window, then a fifth of the next (the five decaying as "previous").
    assert all(w is not None and 12.0 - 0.01 <= w <= 72.0 for w in waits)
    # Another key has its own budget.
    assert await a.hit("sub:bob", 5, 60.0) is None


async def test_concurrent_hits_from_both_replicas_admit_exactly_the_limit(
    two_stores: tuple[RedisStore, RedisStore],
) -> None:
    a, b = (RedisRateLimiter(store) for store in two_stores)
    results = await asyncio.gather(
        *((a if i % 2 else b).hit("tool:alice:notes_add", 7, 60.0) for i in range(40))
    )
    assert sum(result is None for result in results) == 7


async def test_the_window_refills(two_stores: tuple[RedisStore, RedisStore]) -> None:
    limiter = RedisRateLimiter(two_stores[0])
    assert await limiter.hit("ip:10.0.0.1", 1, 0.2) is None
    wait = await limiter.hit("ip:10.0.0.1", 1, 0.2)
    assert wait is not None and wait <= 0.4
    await asyncio.sleep(0.45)  # two windows later the previous count no longer weighs
    assert await limiter.hit("ip:10.0.0.1", 1, 0.2) is None


async def test_a_full_window_waits_until_a_retry_is_admitted(
    two_stores: tuple[RedisStore, RedisStore],
) -> None:
    # Two of two in one 0.5 s window: the wait covers the rest of the window AND half of the
    # next (the two then weigh as "previous"), so the retry it promises is admitted (the same
    # arithmetic as the memory limiter, tests/unit/test_rate_window.py).
    limiter = RedisRateLimiter(two_stores[0])
    assert [await limiter.hit("ip:10.0.0.2", 2, 0.5) for _ in range(2)] == [None, None]
    wait = await limiter.hit("ip:10.0.0.2", 2, 0.5)
    assert wait is not None and 0.248 <= wait <= 0.75
    await asyncio.sleep(wait + 0.01)
    assert await limiter.hit("ip:10.0.0.2", 2, 0.5) is None


async def test_keys_are_hashed_and_expire(
    two_stores: tuple[RedisStore, RedisStore], redis_server: RedisServer
) -> None:
    store = two_stores[0]
    await RedisRateLimiter(store).hit("sub:alice@example.com", 3, 60.0)
    client = redis_server.client()
    keys = [key.decode() for key in client.keys(store.prefix + "*")]
    assert len(keys) == 1 and keys[0].startswith(store.prefix + "rl:")
    assert "alice" not in keys[0]
    assert 0 < client.pttl(keys[0]) <= 120_000


async def test_leases_hold_across_stores_release_and_expire(
    two_stores: tuple[RedisStore, RedisStore],
) -> None:
    a, b = (RedisLeases(store) for store in two_stores)
    first = await a.acquire("tool:alice:report", 1, 30.0)
    assert first is not None
    assert await b.acquire("tool:alice:report", 1, 30.0) is None
    await first.release()
    second = await b.acquire("tool:alice:report", 1, 0.3)
    assert second is not None
    # Never released (the holder "died"): the slot frees itself at the lease's expiry.
    assert await a.acquire("tool:alice:report", 1, 30.0) is None
    await asyncio.sleep(0.4)
    third = await a.acquire("tool:alice:report", 1, 30.0)
    assert third is not None
    await third.release()


async def test_a_limit_of_two_admits_two_holders() -> None:
    leases = MemoryLeases()
    one, two = await leases.acquire("k", 2, 1.0), await leases.acquire("k", 2, 1.0)
    assert one is not None and two is not None
    assert await leases.acquire("k", 2, 1.0) is None
    await one.release()
    await one.release()  # a second release must not free the other holder's slot
    assert leases.slots.in_use("k") == 1


class TestStoreFaults:
    async def test_an_unreachable_store_fails_fast_then_backs_off(self) -> None:
        metrics = Metrics()
        server = RedisServer.launch()
        url = server.url
        server.destroy()  # nothing listens there any more
        store = store_for(url, unique_prefix(), metrics=metrics)
        try:
            with pytest.raises(StoreUnavailable):
                await RedisRateLimiter(store).hit("k", 1, 60.0)
            assert store.up is False and store.backing_off
            assert metrics.state_store_up._value.get() == 0
            with pytest.raises(StoreUnavailable, match="backing off"):
                await RedisRateLimiter(store).hit("k", 1, 60.0)
        finally:
            await store.close()

    async def test_a_store_that_never_answers_is_cut_off_by_the_deadline(self) -> None:
        accepted: list[asyncio.StreamWriter] = []

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)  # accept, read nothing, answer nothing

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store = store_for(f"redis://127.0.0.1:{port}/0", unique_prefix(), timeout_ms=100)
        try:
            with pytest.raises(StoreUnavailable):
                await asyncio.wait_for(RedisRateLimiter(store).hit("k", 1, 60.0), timeout=5)
            assert accepted, "the client connected and then gave up at its deadline"
        finally:
            await store.close()
            for writer in accepted:
                writer.close()
            server.close()
            await server.wait_closed()

    async def test_local_fallback_deny_fallback_and_recovery(self, tmp_path: object) -> None:
        metrics = Metrics()
        server = RedisServer.launch()
        store = store_for(server.url, unique_prefix(), metrics=metrics)
        shared = RedisRateLimiter(store)
        local = FallbackRateLimiter(
            shared, MemoryRateLimiter(), kind="principal", policy="local", metrics=metrics
        )
        deny = FallbackRateLimiter(
            shared, MemoryRateLimiter(), kind="ip", policy="deny", metrics=metrics
        )
        leases = FallbackLeases(
            RedisLeases(store),
            MemoryLeases(),
            kind="tool_concurrency",
            policy="deny",
            metrics=metrics,
        )
        try:
            assert await local.hit("sub:a", 2, 60.0) is None  # shared count 1
            server.stop()
            # Redis is gone: `local` decides with this replica's own (fresh) counter...
            assert await local.hit("sub:a", 2, 60.0) is None
            assert await local.hit("sub:a", 2, 60.0) is None
            assert await local.hit("sub:a", 2, 60.0) is not None
            # ... and `deny` refuses, with the fixed wait.
            assert await deny.hit("ip:1", 100, 60.0) == DENY_WAIT_S
            assert await leases.acquire("tool:a:t", 5, 10.0) is None
            errors = metrics.state_store_errors_total
            assert errors.labels(kind="principal")._value.get() == 3
            assert errors.labels(kind="ip")._value.get() == 1
            assert errors.labels(kind="tool_concurrency")._value.get() == 1
            server.start()
            await asyncio.sleep(1.1)  # past the back-off
            # Recovered: decisions are shared again (this Redis kept nothing: no persistence).
            assert await local.hit("sub:a", 2, 60.0) is None
            assert await local.hit("sub:a", 2, 60.0) is None
            assert await local.hit("sub:a", 2, 60.0) is not None
            assert store.up is True and metrics.state_store_up._value.get() == 1
            lease = await leases.acquire("tool:a:t", 5, 10.0)
            assert lease is not None
            await lease.release()
        finally:
            await store.close()
            server.destroy()


async def test_each_limiter_key_kind_follows_its_own_store_error_policy() -> None:
    """The front door's one RateLimiter: the key's namespace picks state.on_store_error.<kind>."""
    from gateway.limits.fallback import SharedRateLimiter

    metrics = Metrics()
    server = RedisServer.launch()
    url = server.url
    server.destroy()
    store = store_for(url, unique_prefix(), metrics=metrics)
    shared, local = RedisRateLimiter(store), MemoryRateLimiter()

    def kind(name: str, policy: str) -> FallbackRateLimiter:
        return FallbackRateLimiter(shared, local, kind=name, policy=policy, metrics=metrics)  # type: ignore[arg-type]

    limiter = SharedRateLimiter(
        {
            "ip": kind("ip", "deny"),
            "principal": kind("principal", "local"),
            "tool": kind("tool", "deny"),
            "failed_auth": kind("failed_auth", "local"),
        },
        default=kind("other", "local"),
    )
    try:
        assert await limiter.hit("ip:10.0.0.1", 100, 60.0) == DENY_WAIT_S
        assert await limiter.hit("sub:alice", 100, 60.0) is None
        assert await limiter.hit("tool:alice:echo", 100, 60.0) == DENY_WAIT_S
        assert await limiter.hit("authfail:10.0.0.1", 100, 60.0) is None
        assert await limiter.hit("something:else", 100, 60.0) is None
        errors = metrics.state_store_errors_total
        for name in ("ip", "principal", "tool", "failed_auth", "other"):
            assert errors.labels(kind=name)._value.get() == 1, name
    finally:
        await store.close()
