"""The per-user upstream token store (``gateway/state/upstream_tokens*.py``): the same behaviour in
one replica's memory and in a real redis-server shared by two stores standing for two replicas.

Records are sealed and bound to their key (owner digest and backend), writes compare their
generation, the refresh lease is held by one writer at a time, a change is told to every replica,
and nothing readable of a token is in Redis."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest

from gateway import b64url
from gateway.config import RedisConfig, SealKey, Secret
from gateway.state.browser_records import owner_digest
from gateway.state.store import RedisStore
from gateway.state.upstream_tokens import (
    MemoryUpstreamTokens,
    RecordSeal,
    UpstreamRecord,
    UpstreamTokenStore,
)
from gateway.state.upstream_tokens_redis import RedisUpstreamTokens
from tests.support.redis_server import RedisServer, redis_server, unique_prefix

__all__ = ["redis_server"]

RESOURCE = "https://mcp.example.com/mcp"
KEYS = (SealKey("u2", bytes(range(32, 64))), SealKey("u1", bytes(range(32))))
ALICE = owner_digest("https://id.example.com", "alice")
BOB = owner_digest("https://id.example.com", "bob")
ACCESS = "upstream-access-4c1d9e"
REFRESH = "upstream-refresh-77aa0b"
DAY = 86_400.0


def record(subject: str = "alice", backend: str = "github", **changes: Any) -> UpstreamRecord:
    base = UpstreamRecord(
        issuer="https://id.example.com",
        subject=subject,
        backend=backend,
        server="https://github.example.com",
        client_id="gw",
        access_token=ACCESS,
        refresh_token=REFRESH,
        expires_at=2_000_000_000.0,
        scope="repo",
        connected_at=1,
    )
    return replace(base, **changes)


def seal(key_id: str = "u2", keys: tuple[SealKey, ...] = KEYS) -> RecordSeal:
    return RecordSeal(keys, key_id, resource=RESOURCE)


Pair = tuple[UpstreamTokenStore, UpstreamTokenStore]


@pytest.fixture(params=["memory", "redis"])
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[Pair]:
    """Two views of one store: the same object in memory, two replicas' clients in Redis."""
    if request.param == "memory":
        memory = MemoryUpstreamTokens(seal(), max_idle_s=30 * DAY)
        yield memory, memory
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = unique_prefix()
    clients = [
        RedisStore(RedisConfig(url=Secret(server.url, "env:R"), key_prefix=prefix))
        for _ in range(2)
    ]
    try:
        yield (
            RedisUpstreamTokens(clients[0], seal(), max_idle_s=30 * DAY),
            RedisUpstreamTokens(clients[1], seal(), max_idle_s=30 * DAY),
        )
    finally:
        for client in clients:
            await client.close()


async def test_a_record_written_at_one_replica_is_read_at_the_other(stores: Pair) -> None:
    a, b = stores
    assert await b.get(ALICE, "github") is None
    assert await a.put(ALICE, record(), expect=None)
    found = await b.get(ALICE, "github")
    assert found is not None and found.record == record()
    assert ACCESS not in repr(found) and REFRESH not in repr(found)
    assert await b.get(BOB, "github") is None  # keyed by the person
    assert await b.get(ALICE, "linear") is None  # and by the backend
    assert await b.owners("github") == [ALICE]


async def test_a_write_naming_an_old_generation_writes_nothing(stores: Pair) -> None:
    a, b = stores
    await a.put(ALICE, record(), expect=None)
    first = await a.get(ALICE, "github")
    assert first is not None
    # Replica b refreshes first: its rotated tokens replace the record.
    written = await b.put(
        ALICE, record(access_token="new-a", refresh_token="new-r"), expect=first.generation
    )
    assert written is not None and written != first.generation
    # Replica a's late write of an older grant is refused: the rotated refresh token stays.
    assert await a.put(ALICE, record(access_token="old-a"), expect=first.generation) is None
    now = await a.get(ALICE, "github")
    assert now is not None and (now.record.access_token, now.record.refresh_token) == (
        "new-a",
        "new-r",
    )
    assert now.generation == written
    # Deleted and written again: a fresh generation, never the one an old writer holds.
    await b.delete(ALICE, "github")
    assert await a.put(ALICE, record(), expect=now.generation) is None
    assert await a.get(ALICE, "github") is None


async def test_one_lease_at_a_time_across_replicas(stores: Pair) -> None:
    a, b = stores
    lease = await a.lease(ALICE, "github", 5.0)
    assert lease is not None
    assert await b.lease(ALICE, "github", 5.0) is None
    assert await b.lease(BOB, "github", 5.0) is not None  # another person's record
    await b.release(ALICE, "github", "not-the-holders")
    assert await b.lease(ALICE, "github", 5.0) is None
    await a.release(ALICE, "github", lease)
    assert await b.lease(ALICE, "github", 5.0) is not None


async def test_concurrent_lease_attempts_give_exactly_one_holder(stores: Pair) -> None:
    a, b = stores
    tries = [(a if i % 2 else b).lease(ALICE, "github", 5.0) for i in range(20)]
    held = [lease for lease in await asyncio.gather(*tries) if lease is not None]
    assert len(held) == 1


async def test_every_replica_is_told_of_a_change(stores: Pair) -> None:
    a, b = stores
    heard: list[tuple[bytes, str]] = []
    told = asyncio.Event()

    def listener(owner: bytes, backend: str) -> None:
        heard.append((owner, backend))
        told.set()

    b.on_change(listener)
    running = asyncio.create_task(b.run())
    try:
        if a is not b:
            await _until(lambda: _subscribed(b))
        await a.put(ALICE, record(), expect=None)
        await asyncio.wait_for(told.wait(), 5)
        assert heard[0] == (ALICE, "github")
        told.clear()
        await a.delete(ALICE, "github")
        await asyncio.wait_for(told.wait(), 5)
        assert heard[-1] == (ALICE, "github")
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def _subscribed(store: UpstreamTokenStore) -> bool:
    assert isinstance(store, RedisUpstreamTokens)
    client = store._store.client  # the test's own look at the channel
    counts = await client.pubsub_numsub(store._channel)
    return bool(counts and counts[0][1] >= 1)


async def _until(condition: Callable[[], Any], timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, "condition never held"
        await asyncio.sleep(0.02)  # a readiness poll of the subscription


async def test_nothing_of_a_token_or_a_name_is_in_redis(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    client = RedisStore(RedisConfig(url=Secret(redis_server.url, "env:R"), key_prefix=prefix))
    try:
        store = RedisUpstreamTokens(client, seal(), max_idle_s=DAY)
        await store.put(ALICE, record(), expect=None)
        raw = redis_server.client()
        dump = b""
        for key in raw.scan_iter(f"{prefix}*"):
            dump += key
            kind = raw.type(key)
            if kind == b"hash":
                dump += b"".join(raw.hgetall(key).values())
            elif kind == b"zset":
                dump += b"".join(member for member, _ in raw.zrange(key, 0, -1, withscores=True))
            ttl = raw.pttl(key)
            assert kind != b"hash" or 0 < ttl <= DAY * 1000  # idle expiry
        for secret in (ACCESS, REFRESH, "alice", "id.example.com", "repo"):
            assert secret.encode() not in dump
        assert base64.b64encode(ACCESS.encode()) not in dump
    finally:
        await client.close()


def test_a_record_opens_only_under_its_own_key_and_place() -> None:
    sealed = seal().seal(ALICE, record())
    assert seal().open(ALICE, "github", sealed) == record()
    assert seal().open(BOB, "github", sealed) is None  # moved to another person's key
    assert seal().open(ALICE, "linear", sealed) is None  # or another backend's
    tampered = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    assert seal().open(ALICE, "github", tampered) is None
    # A record of another backend sealed under this one's key does not pass as this one.
    other = seal().seal(ALICE, record(backend="linear"))
    assert seal().open(ALICE, "linear", other) is not None


def test_rotation_opens_with_every_listed_key_and_seals_with_the_chosen_one() -> None:
    old = RecordSeal((KEYS[1],), "u1", resource=RESOURCE).seal(ALICE, record())
    assert seal("u2").open(ALICE, "github", old) == record()  # u1 is still listed
    assert RecordSeal((KEYS[0],), "u2", resource=RESOURCE).open(ALICE, "github", old) is None
    decoded = b64url.decode_canonical(seal("u2").seal(ALICE, record()))
    assert decoded is not None and decoded[:4] == b"\x01\x02u2"  # version, id length, id
    # Another deployment (another resource) with the same keys cannot open it.
    assert (
        RecordSeal(KEYS, "u2", resource="https://other.example/mcp").open(ALICE, "github", old)
        is None
    )


def test_the_state_a_record_is_in() -> None:
    now = 1_900_000_000.0
    assert record().state(now) == "connected"
    assert record(expires_at=now - 1).state(now) == "connected"  # refreshable
    assert record(expires_at=now - 1, refresh_token=None).state(now) == "expired"
    assert record(status="reconnect_required").state(now) == "reconnect_required"
    assert record(access_token=None, refresh_token=None).state(now) == "reconnect_required"


async def test_idle_records_go_from_memory() -> None:
    clock = [1000.0]
    store = MemoryUpstreamTokens(seal(), max_idle_s=10.0, clock=lambda: clock[0])
    await store.put(ALICE, record(), expect=None)
    clock[0] += 9
    await store.touch(ALICE, "github")  # used: ten more seconds
    clock[0] += 9
    assert await store.get(ALICE, "github") is not None
    clock[0] += 11
    assert await store.get(ALICE, "github") is None
    assert await store.owners("github") == []
