"""The shared token cache and the revocation list against a real redis-server (one process;
the multi-replica behaviour is in ``test_replicas.py`` and ``test_revocation.py``)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.auth.sharing import ReplicaSharing
from gateway.errors import RevocationUnavailable
from gateway.seams import CachedPrincipal, Principal, frozen_claims
from gateway.state.revocation import RevocationList
from gateway.state.store import RedisStore
from gateway.state.token_cache import RedisTokenCache, decode_entry, encode_entry
from tests.integration.state.test_redis_limits import store_for
from tests.support.redis_server import RedisServer, redis_server, unique_prefix

__all__ = ["redis_server"]

DIGEST = hashlib.sha256(b"a-token").digest()


def principal(**changes: object) -> Principal:
    base = Principal(
        subject="alice",
        client_id="cli",
        scopes=frozenset({"mcp:access", "docs:read"}),
        expires_at=time.time() + 600,
        issuer="https://id.example.com",
        fingerprint=DIGEST.hex()[:12],
        skew_s=30.0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


async def until_marker(redis: RedisServer, store: RedisStore, digest: bytes) -> None:
    """Wait (up to 15 s: the subscriber's reconnect back-off) for the marker of ``digest``."""
    deadline = time.monotonic() + 15
    while redis.client().zscore(store.key("revoked"), digest.hex()) is None:
        assert time.monotonic() < deadline, "the marker was never written back"
        await asyncio.sleep(0.05)


@pytest.fixture
async def store(redis_server: RedisServer) -> AsyncIterator[RedisStore]:
    s = store_for(redis_server.url, unique_prefix())
    try:
        yield s
    finally:
        await s.close()


class TestEntryFormat:
    def test_every_principal_field_round_trips(self) -> None:
        """Fails when Principal gains a field the shared cache does not carry yet."""
        bound = principal(actor="agent-7", binding="0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
        bound = dataclasses.replace(bound, claims=frozen_claims({"tid": "t", "groups": ["/a"]}))
        entry = CachedPrincipal(bound, time.time() + 30)
        decoded = decode_entry(encode_entry(entry), DIGEST, time.time())
        assert decoded == entry
        assert decoded is not None and decoded.principal.claims == {"tid": "t", "groups": ["/a"]}
        document = json.loads(encode_entry(entry))
        carried = {"sub", "client_id", "scopes", "exp", "iss", "fp"}
        carried |= {"skew", "am", "act", "jkt", "claims"}
        # What a replica derives from a principal (a CEL context, a DPoP-bound copy) is no
        # field of it (seams.PrincipalFacts): every field is carried.
        assert len(carried) == len(dataclasses.fields(Principal)), "update encode/decode_entry"
        assert carried <= set(document)

    def test_a_bound_entry_has_its_own_version_so_older_replicas_never_read_it(self) -> None:
        """A replica without DPoP support reads only version 1: it would drop the binding."""
        bound = principal(binding="0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I")
        document = json.loads(encode_entry(CachedPrincipal(bound, time.time() + 30)))
        assert document["v"] == 2
        plain = json.loads(encode_entry(CachedPrincipal(principal(), time.time() + 30)))
        assert plain["v"] == 1 and "jkt" not in plain
        # A version that does not match its binding is refused, either way round.
        for version, doc in ((1, document), (2, plain)):
            forged = json.dumps({**doc, "v": version}).encode()
            assert decode_entry(forged, DIGEST, time.time()) is None

    def test_the_auth_method_round_trips_and_defaults_to_introspection(self) -> None:
        combined = CachedPrincipal(principal(auth_method="jwt+introspection"), time.time() + 30)
        assert decode_entry(encode_entry(combined), DIGEST, time.time()) == combined
        document = json.loads(encode_entry(combined))
        del document["am"]  # an entry written before several issuers existed
        old = decode_entry(json.dumps(document).encode(), DIGEST, time.time())
        assert old is not None and old.principal.auth_method == "introspection"

    @pytest.mark.parametrize(
        "mutate",
        [
            lambda d: d.update(v=2),
            lambda d: d.update(act=7),
            lambda d: d.update(act=""),
            lambda d: d.update(act="a" * 257),
            lambda d: d.update(sub=""),
            lambda d: d.update(sub=7),
            lambda d: d.update(scopes="mcp:access"),
            lambda d: d.update(scopes=[1]),
            lambda d: d.update(exp="never"),
            lambda d: d.update(exp=float("inf")),
            lambda d: d.update(until=True),
            lambda d: d.update(fp="0" * 12),  # another token's entry copied here
            lambda d: d.update(until=d["exp"] + d["skew"] + 1),  # past the token's own expiry
            lambda d: d.update(skew=-1),
            lambda d: d.update(skew=10_000),
            lambda d: d.update(am="anonymous"),  # auth_method outside its bounded set
            lambda d: d.update(until=time.time() - 1),  # no longer fresh
            lambda d: d.pop("iss"),
        ],
    )
    def test_a_malformed_or_foreign_entry_is_refused(self, mutate: object) -> None:
        document = json.loads(encode_entry(CachedPrincipal(principal(), time.time() + 30)))
        mutate(document)  # type: ignore[operator]
        assert decode_entry(json.dumps(document).encode(), DIGEST, time.time()) is None

    def test_garbage_is_refused(self) -> None:
        for raw in (b"", b"\xff\xfe", b"[1]", b"x" * 20_000, b'{"v":1}'):
            assert decode_entry(raw, DIGEST, time.time()) is None


class TestRedisTokenCache:
    async def test_claim_wait_put(self, store: RedisStore) -> None:
        a, b = RedisTokenCache(store), RedisTokenCache(store)
        assert await a.get(DIGEST) is None
        assert await a.claim(DIGEST, 5.0) is True
        assert await b.claim(DIGEST, 5.0) is False  # one introspection at a time
        entry = CachedPrincipal(principal(), time.time() + 30)
        waiter = asyncio.create_task(b.wait(DIGEST, 5.0))
        await asyncio.sleep(0.05)
        await a.put(DIGEST, entry)
        assert await waiter == entry
        assert await b.get(DIGEST) == entry
        assert await b.claim(DIGEST, 5.0) is True  # put released the claim

    async def test_a_released_claim_ends_the_wait_empty_handed(self, store: RedisStore) -> None:
        cache = RedisTokenCache(store)
        assert await cache.claim(DIGEST, 5.0)
        waiter = asyncio.create_task(cache.wait(DIGEST, 5.0))
        await asyncio.sleep(0.05)
        await cache.release(DIGEST)
        assert await asyncio.wait_for(waiter, 2.0) is None

    async def test_an_entry_expires_at_its_fresh_until(
        self, store: RedisStore, redis_server: RedisServer
    ) -> None:
        cache = RedisTokenCache(store)
        await cache.put(DIGEST, CachedPrincipal(principal(), time.time() + 0.3))
        assert await cache.get(DIGEST) is not None
        assert 0 < redis_server.client().pttl(cache.entry_key(DIGEST)) <= 300
        await asyncio.sleep(0.4)
        assert await cache.get(DIGEST) is None

    async def test_a_dead_store_is_a_miss_and_a_claim(self) -> None:
        server = RedisServer.launch()
        url = server.url
        server.destroy()
        dead = store_for(url, unique_prefix())
        try:
            cache = RedisTokenCache(dead)
            assert await cache.get(DIGEST) is None
            assert await cache.claim(DIGEST, 1.0) is True
            await cache.put(DIGEST, CachedPrincipal(principal(), time.time() + 30))
        finally:
            await dead.close()


class TestRevocationList:
    async def test_local_only(self) -> None:
        evicted: list[bytes] = []
        now = [1000.0]
        revocations = RevocationList(ttl_s=60, on_revoke=evicted.append, clock=lambda: now[0])
        assert await revocations.revoked(DIGEST) is False
        until, shared = await revocations.revoke(DIGEST)
        assert (until, shared) == (1060.0, True)
        assert evicted == [DIGEST]
        assert await revocations.revoked(DIGEST) is True
        now[0] = 1060.0
        assert await revocations.revoked(DIGEST) is False  # the marker ended
        with pytest.raises(ValueError, match="32-byte revocation key"):
            await revocations.revoke(DIGEST[:6])

    async def test_shared_marker_broadcast_and_catch_up(self, store: RedisStore) -> None:
        seen_a: list[bytes] = []
        seen_b: list[bytes] = []
        a = RevocationList(ttl_s=60, on_revoke=seen_a.append, store=store)
        b = RevocationList(ttl_s=60, on_revoke=seen_b.append, store=store)
        listener = asyncio.create_task(b.run())
        try:
            await asyncio.sleep(0.2)  # subscribed
            await a.revoke(DIGEST)
            for _ in range(50):
                if seen_b:
                    break
                await asyncio.sleep(0.02)
            assert seen_b == [DIGEST]  # delivered by pub/sub
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
        # A replica that was not listening: the marker answers, and catch-up applies it.
        c_seen: list[bytes] = []
        c = RevocationList(ttl_s=60, on_revoke=c_seen.append, store=store)
        assert await c.revoked(DIGEST) is True
        other = hashlib.sha256(b"other").digest()
        await a.revoke(other)
        d_seen: list[bytes] = []
        d = RevocationList(ttl_s=60, on_revoke=d_seen.append, store=store)
        listener = asyncio.create_task(d.run())
        try:
            for _ in range(50):
                if len(d_seen) == 2:
                    break
                await asyncio.sleep(0.02)
            assert sorted(d_seen) == sorted([DIGEST, other])
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)

    async def test_the_marker_set_expires_with_its_last_marker(
        self, store: RedisStore, redis_server: RedisServer
    ) -> None:
        revocations = RevocationList(ttl_s=60, on_revoke=lambda d: None, store=store)
        await revocations.revoke(DIGEST)
        client = redis_server.client()
        key = store.key("revoked")
        assert 0 < client.pttl(key) <= 62_000  # not a set that lives forever
        await revocations.revoke(hashlib.sha256(b"later").digest())
        assert client.zcard(key) == 2

    async def test_markers_a_redis_restart_lost_are_written_back(self, tmp_path: Path) -> None:
        """Redis without persistence restarts: the replica that still knows the revocations
        writes the markers back, so a replica started afterwards refuses those tokens too."""
        redis = RedisServer.launch(tmp_path / "redis")
        store = store_for(redis.url, unique_prefix())
        a = RevocationList(ttl_s=60, on_revoke=lambda d: None, store=store)
        listener = asyncio.create_task(a.run())
        try:
            await asyncio.sleep(0.2)
            await a.revoke(DIGEST)
            redis.stop()
            redis.start()  # empty
            assert redis.client().zscore(store.key("revoked"), DIGEST.hex()) is None
            await until_marker(redis, store, DIGEST)
            restarted = RevocationList(ttl_s=60, on_revoke=lambda d: None, store=store)
            assert await restarted.revoked(DIGEST) is True
        finally:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
            await store.close()
            redis.destroy()

    async def test_a_revocation_taken_while_redis_was_down_is_shared_when_it_returns(
        self, tmp_path: Path
    ) -> None:
        redis = RedisServer.launch(tmp_path / "redis")
        prefix = unique_prefix()
        stores = [store_for(redis.url, prefix) for _ in range(2)]
        seen_b: list[bytes] = []
        a = RevocationList(ttl_s=60, on_revoke=lambda d: None, store=stores[0])
        b = RevocationList(ttl_s=60, on_revoke=seen_b.append, store=stores[1])
        listeners = [asyncio.create_task(x.run()) for x in (a, b)]
        try:
            await asyncio.sleep(0.2)
            redis.stop()
            assert await a.revoke(DIGEST) == (pytest.approx(time.time() + 60, abs=5), False)
            redis.start()
            await until_marker(redis, stores[0], DIGEST)
            for _ in range(250):  # b evicts it too: broadcast, or its own catch-up
                if seen_b:
                    break
                await asyncio.sleep(0.02)
            assert seen_b == [DIGEST]
        finally:
            for listener in listeners:
                listener.cancel()
            await asyncio.gather(*listeners, return_exceptions=True)
            for s in stores:
                await s.close()
            redis.destroy()

    async def test_a_dead_store_follows_the_policy(self) -> None:
        server = RedisServer.launch()
        url = server.url
        server.destroy()
        dead = store_for(url, unique_prefix())
        try:
            local = RevocationList(ttl_s=60, on_revoke=lambda d: None, store=dead)
            assert await local.revoked(DIGEST) is False
            _, shared = await local.revoke(DIGEST)
            assert shared is False  # refused here, but the others were not told
            assert await local.revoked(DIGEST) is True
            deny = RevocationList(ttl_s=60, on_revoke=lambda d: None, store=dead, policy="deny")
            with pytest.raises(RevocationUnavailable):
                await deny.revoked(DIGEST)
        finally:
            await dead.close()


class TestReplicaSharing:
    async def test_a_result_published_between_the_miss_and_the_claim_is_used(
        self, store: RedisStore
    ) -> None:
        """Replica B misses the shared entry, then A publishes (entry written, claim ended in
        one write) before B claims: B must read A's result, not introspect a second time."""
        a = RedisTokenCache(store)
        entry = CachedPrincipal(principal(), time.time() + 30)
        assert await a.claim(DIGEST, 5.0) is True  # A is introspecting

        class PublishAfterMiss(RedisTokenCache):
            async def get(self, digest: bytes) -> CachedPrincipal | None:
                found = await super().get(digest)
                if found is None:
                    await a.put(digest, entry)  # A finishes right after B's first look
                return found

        b = ReplicaSharing(None, PublishAfterMiss(store), clock=time.time)
        assert await b.lookup(DIGEST, 5.0) == (entry, False)
        # B's own claim was given back: a later miss can claim again.
        assert await a.claim(DIGEST, 5.0) is True
