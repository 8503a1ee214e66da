"""The per-user upstream tokens in Redis, shared by every replica (``state.backend: redis``).

Keys under ``state.redis.key_prefix`` (:mod:`gateway.state.upstream_tokens` says what a record
is; no key holds a name, an e-mail or a token)::

    uo:tok:<owner hex>:<backend>    hash  v: the sealed record, g: its generation
                                    (expires max_idle_days after its last use)
    uo:lease:<owner hex>:<backend>  the refresh lease (SET NX PX, a random token)
    uo:idx:<backend>                sorted set: owner hex -> last use (ms), for listing and
                                    counting without a scan
    uo:changed                      pub/sub channel: "<owner hex>:<backend>" after each write

A write is one Lua script: compare the generation (when the caller names one), write the sealed
value with a fresh generation, set the expiry, index and publish, so a refresh that loses a race
(another replica wrote first, the person reconnected or disconnected) writes nothing. Every call
goes through :meth:`~gateway.state.store.RedisStore.call` and raises
:class:`~gateway.state.store.StoreUnavailable` when Redis cannot answer in time: there is no local
fallback for a person's tokens (the call fails closed, 503).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import redis.asyncio as aioredis

from gateway.observability.logging import get_logger
from gateway.state.store import RedisStore
from gateway.state.upstream_tokens import (
    Listener,
    RecordSeal,
    Stored,
    UpstreamRecord,
    new_generation,
)

__all__ = ["RedisUpstreamTokens"]

PUT_SCRIPT: Final = """
local g = redis.call('HGET', KEYS[1], 'g')
if ARGV[1] ~= '' and g ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'g', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
redis.call('PUBLISH', ARGV[7], ARGV[8])
return 1
"""
"""KEYS: the record, the backend's index. ARGV: expected generation ('' for any), sealed
value, new generation, idle lifetime (ms), now (ms), owner hex, channel, message."""
DELETE_SCRIPT: Final = """
local n = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return n
"""
RELEASE_SCRIPT: Final = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
"""Only the holder's own lease is released (an expired one may be another's by now)."""

_log = get_logger("gateway.state")


class RedisUpstreamTokens:
    """Every replica's records (module docstring)."""

    def __init__(
        self,
        store: RedisStore,
        seal: RecordSeal,
        *,
        max_idle_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._seal = seal
        self._idle_ms = int(max_idle_s * 1000)
        self._clock = clock
        self._put = store.client.register_script(PUT_SCRIPT)
        self._delete = store.client.register_script(DELETE_SCRIPT)
        self._release = store.client.register_script(RELEASE_SCRIPT)
        self._channel = store.key("uo", "changed")
        self._listeners: list[Listener] = []

    def _key(self, owner: bytes, backend: str) -> str:
        return self._store.key("uo", "tok", owner.hex(), backend)

    def _index(self, backend: str) -> str:
        return self._store.key("uo", "idx", backend)

    async def get(self, owner: bytes, backend: str) -> Stored | None:
        name = self._key(owner, backend)
        value, generation = await self._store.call(lambda c: c.hmget(name, ["v", "g"]))
        if value is None or generation is None:
            return None
        record = self._seal.open(owner, backend, _text(value))
        if record is None:
            _log.warning("upstream_token.unreadable", backend=backend)
            return None
        return Stored(record, _text(generation))

    async def put(self, owner: bytes, record: UpstreamRecord, *, expect: str | None) -> str | None:
        backend, generation = record.backend, new_generation()
        keys = [self._key(owner, backend), self._index(backend)]
        args: list[str | int] = [
            expect or "",
            self._seal.seal(owner, record),
            generation,
            self._idle_ms,
            self._now_ms(),
            owner.hex(),
            self._channel,
            f"{owner.hex()}:{backend}",
        ]
        script = self._put
        written = bool(await self._store.call(lambda c: script(keys=keys, args=args, client=c)))
        if not written:
            return None
        self._told(owner, backend)  # this replica at once; the others by the channel
        return generation

    async def delete(self, owner: bytes, backend: str) -> bool:
        keys = [self._key(owner, backend), self._index(backend)]
        args = [owner.hex(), self._channel, f"{owner.hex()}:{backend}"]
        script = self._delete
        existed = bool(await self._store.call(lambda c: script(keys=keys, args=args, client=c)))
        self._told(owner, backend)
        return existed

    async def touch(self, owner: bytes, backend: str) -> None:
        name, index = self._key(owner, backend), self._index(backend)
        now, idle = self._now_ms(), self._idle_ms

        async def touch(client: aioredis.Redis) -> None:
            pipe = client.pipeline(transaction=False)
            pipe.pexpire(name, idle)
            pipe.zadd(index, {owner.hex(): now}, xx=True)
            await pipe.execute()

        await self._store.call(touch)

    async def lease(self, owner: bytes, backend: str, ttl_s: float) -> str | None:
        name, token = self._store.key("uo", "lease", owner.hex(), backend), new_generation()
        ttl_ms = max(1, int(ttl_s * 1000))
        taken = await self._store.call(lambda c: c.set(name, token, nx=True, px=ttl_ms))
        return token if taken else None

    async def release(self, owner: bytes, backend: str, lease: str) -> None:
        name, script = self._store.key("uo", "lease", owner.hex(), backend), self._release
        await self._store.call(lambda c: script(keys=[name], args=[lease], client=c))

    async def owners(self, backend: str) -> list[bytes]:
        index, since = self._index(backend), self._now_ms() - self._idle_ms

        async def read(client: aioredis.Redis) -> list[bytes]:
            pipe = client.pipeline(transaction=False)
            pipe.zremrangebyscore(index, "-inf", since)
            pipe.zrange(index, 0, -1)
            _, members = await pipe.execute()
            return [bytes.fromhex(bytes(m).decode("ascii")) for m in members]

        return await self._store.call(read)

    def on_change(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def run(self) -> None:
        await self._store.listen(self._channel, self._heard)

    def _heard(self, message: bytes) -> None:
        owner_hex, sep, backend = message.decode("ascii", "replace").partition(":")
        try:
            owner = bytes.fromhex(owner_hex)
        except ValueError:
            return
        if sep:
            self._told(owner, backend)

    def _told(self, owner: bytes, backend: str) -> None:
        for listener in self._listeners:
            listener(owner, backend)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


def _text(value: bytes | str) -> str:
    return value if isinstance(value, str) else value.decode("ascii", "replace")
