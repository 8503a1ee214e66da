"""Rate limits and concurrency leases shared by every replica, one atomic Lua script each.

Both run server-side in one round trip and read the clock with Redis' ``TIME``, so every replica
decides against the same counters and the same clock (replica clock skew does not matter).

**Rate limit** (:class:`RedisRateLimiter`): the same sliding-window counter as
:class:`gateway.limits.memory.MemoryRateLimiter`. One hash per key holds the current fixed
window's index and count and the previous window's count; an event is admitted while
``previous * (1 - elapsed_fraction) + current + 1 <= limit``. Error bound (docs/operations.md):
within one fixed window never more than ``limit`` events; over any interval of one window's
length at most ``limit * (1 + elapsed_fraction)`` < ``2 * limit`` (only when the previous window's
events all came at its very end), exactly ``limit`` for evenly spread traffic.

**Concurrency lease** (:class:`RedisLeases`): a sorted set per key whose members are lease ids
scored by their expiry. Acquiring drops expired leases, then adds one when fewer than ``limit``
remain; releasing removes it. A replica that dies mid-call never releases, and its lease simply
expires at its deadline, so a crash frees the slot within ``hold_s``.

Keys are ``<key_prefix>rl:<blake2b-128 of the limiter key>`` and ``<key_prefix>lease:<...>``:
bounded length whatever the subject or tool name, and no subject names stored in Redis.
"""

from __future__ import annotations

import hashlib
import os
from typing import Final

from gateway.state.store import RedisStore

__all__ = ["RedisLeases", "RedisRateLimiter"]

RATE_SCRIPT: Final = """
local limit = tonumber(ARGV[1])
local per_ms = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local index = math.floor(now / per_ms)
local state = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
local window = tonumber(state[1]) or index
local current = tonumber(state[2]) or 0
local previous = tonumber(state[3]) or 0
if window ~= index then
  if window == index - 1 then previous = current else previous = 0 end
  current = 0
end
local elapsed = (now - index * per_ms) / per_ms
local estimated = previous * (1 - elapsed) + current
local wait = 0
if estimated + 1 > limit then
  -- gateway.limits.memory.window_wait: a full window must also decay as the next one's previous
  if current + 1 <= limit and previous > 0 then
    wait = (estimated + 1 - limit) / previous * per_ms
  elseif current > 0 then
    wait = (index + 1) * per_ms - now + (current + 1 - limit) / current * per_ms
  else
    wait = (index + 1) * per_ms - now + per_ms
  end
  wait = math.max(math.ceil(wait), 1)
else
  current = current + 1
end
redis.call('HSET', KEYS[1], 'w', index, 'c', current, 'p', previous)
redis.call('PEXPIRE', KEYS[1], 2 * per_ms)
return wait
"""
"""KEYS[1]: the counter hash; ARGV: limit, window ms. Returns 0 (admitted) or the wait in ms."""

ACQUIRE_SCRIPT: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1
"""
"""KEYS[1]: the lease set; ARGV: limit, hold ms, lease id. Returns 1 (acquired) or 0."""


def _hashed(key: str) -> str:
    return hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class RedisRateLimiter:
    """Implements :class:`gateway.seams.RateLimiter` on Redis; raises StoreUnavailable."""

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._script = store.client.register_script(RATE_SCRIPT)

    async def hit(self, key: str, count: int, per_s: float) -> float | None:
        redis_key = self._store.key("rl", _hashed(key))
        per_ms = max(1, round(per_s * 1000))
        wait_ms = await self._store.call(
            lambda client: self._script(keys=[redis_key], args=[count, per_ms], client=client)
        )
        return None if int(wait_ms) == 0 else int(wait_ms) / 1000.0


class RedisLease:
    """One held slot; :meth:`release` gives it back (or it expires at its deadline)."""

    __slots__ = ("_id", "_key", "_store")

    def __init__(self, store: RedisStore, key: str, lease_id: str) -> None:
        self._store, self._key, self._id = store, key, lease_id

    async def release(self) -> None:
        # Best effort: if Redis cannot answer now, the lease expires on its own.
        await self._store.call(lambda client: client.zrem(self._key, self._id))


class RedisLeases:
    """Implements :class:`gateway.seams.ConcurrencyLimiter` on Redis; raises StoreUnavailable."""

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._script = store.client.register_script(ACQUIRE_SCRIPT)

    async def acquire(self, key: str, limit: int, hold_s: float) -> RedisLease | None:
        redis_key = self._store.key("lease", _hashed(key))
        lease_id = os.urandom(12).hex()
        hold_ms = max(1, round(hold_s * 1000))
        acquired = await self._store.call(
            lambda client: self._script(
                keys=[redis_key], args=[limit, hold_ms, lease_id], client=client
            )
        )
        return RedisLease(self._store, redis_key, lease_id) if int(acquired) == 1 else None
