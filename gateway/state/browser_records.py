"""What the browser login surface keeps in the shared store: pending actions and one-time marks.

Two kinds of record (:class:`BrowserState`; the login layer, ``gateway/login``, gives them their
meaning and their keys, which are digests, never a nonce or a session id as such):

* **A pending action**: a single-use, short-lived record an MCP request created (a consent to
  give, a call to approve) and a page redeems. It is bound to its owner (a digest of the MCP
  caller's issuer and subject): :meth:`BrowserState.read` hands the body out only to that owner
  (and with ``take``, deletes it in the same step, so it is redeemed once), and tells anyone
  else only that the record is not theirs, leaving it untouched for the person it belongs to.
  :meth:`BrowserState.put` never overwrites (``SET NX``).
* **A mark**: a key that exists until an instant: :meth:`BrowserState.mark` sets it only the first
  time (an authorization response's ``state`` is accepted once), :meth:`BrowserState.marked`
  reads it (a session ended by sign-out stays ended on every replica until it would have expired).

:class:`MemoryBrowserState` is one replica's (``state.backend: memory``); :class:`RedisBrowserState`
is every replica's (one atomic Lua script per read, so a record is redeemed once however many
replicas race for it). Redis calls raise :class:`~gateway.state.store.StoreUnavailable`: the
pages fail closed (503), there is no local fallback for a single-use record.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from gateway.bounded import BoundedMap
from gateway.jsonkit.write import canonical
from gateway.state.store import RedisStore

__all__ = [
    "MAX_RECORDS",
    "BrowserState",
    "Lookup",
    "MemoryBrowserState",
    "RedisBrowserState",
    "owner_digest",
]

MAX_RECORDS: Final = 100_000
"""Pending actions (and, separately, marks) one replica keeps in memory; past it the oldest go."""

Found = Literal["missing", "foreign", "owned"]


def owner_digest(issuer: str, subject: str) -> bytes:
    """The one digest of a person (an MCP caller's issuer and subject, as verified) that the
    shared store binds and keys records by: no names in the store, and one spelling (canonical
    JSON of the pair, so no separator ambiguity). Pending actions and stored upstream tokens
    use it alike."""
    return hashlib.sha256(canonical([issuer, subject])).digest()


@dataclass(frozen=True, slots=True)
class Lookup:
    """What a read found: nothing (unknown, expired or already redeemed), another owner's
    record (its body is not handed out), or the owner's record and its body."""

    found: Found
    body: bytes | None = None


class BrowserState(Protocol):
    async def put(self, key: str, owner: bytes, body: bytes, until: float) -> bool:
        """Store a pending action until Unix time ``until``; False when ``key`` exists."""
        ...

    async def read(self, key: str, owner: bytes, *, take: bool) -> Lookup:
        """The pending action at ``key`` if ``owner`` owns it (deleted with ``take``)."""
        ...

    async def mark(self, key: str, until: float) -> bool:
        """Set ``key`` until ``until``; False when it was set already (a second use)."""
        ...

    async def marked(self, key: str) -> bool:
        """Whether ``key`` is set (and not expired)."""
        ...


class MemoryBrowserState:
    """One replica's records (``state.backend: memory``)."""

    def __init__(
        self, *, max_entries: int = MAX_RECORDS, clock: Callable[[], float] = time.time
    ) -> None:
        self._records: BoundedMap[str, tuple[bytes, bytes]] = BoundedMap(max_entries)
        self._marks: BoundedMap[str, bool] = BoundedMap(max_entries)
        self._clock = clock

    async def put(self, key: str, owner: bytes, body: bytes, until: float) -> bool:
        now = self._clock()
        if self._records.peek(key, now) is not None:
            return False
        self._records.put(key, (owner, body), until)
        self._records.trim(now)
        return True

    async def read(self, key: str, owner: bytes, *, take: bool) -> Lookup:
        record = self._records.peek(key, self._clock())
        if record is None:
            return Lookup("missing")
        if record[0] != owner:
            return Lookup("foreign")
        if take:
            self._records.pop(key)
        return Lookup("owned", record[1])

    async def mark(self, key: str, until: float) -> bool:
        now = self._clock()
        if self._marks.peek(key, now) is not None:
            return False
        self._marks.put(key, True, until)
        self._marks.trim(now)
        return True

    async def marked(self, key: str) -> bool:
        return self._marks.peek(key, self._clock()) is not None


PUT_SCRIPT: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'o', ARGV[1], 'b', ARGV[2])
redis.call('PEXPIREAT', KEYS[1], ARGV[3])
return 1
"""
READ_SCRIPT: Final = """
local owner = redis.call('HGET', KEYS[1], 'o')
if not owner then return {0} end
if owner ~= ARGV[1] then return {1} end
local body = redis.call('HGET', KEYS[1], 'b')
if ARGV[2] == '1' then redis.call('DEL', KEYS[1]) end
return {2, body}
"""
"""Compare the owner and (``take``) delete in one step: two replicas cannot both redeem."""
_FOUND: Final[tuple[Found, ...]] = ("missing", "foreign", "owned")


class RedisBrowserState:
    """Every replica's records, under ``<key_prefix>login:``."""

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._put = store.client.register_script(PUT_SCRIPT)
        self._read = store.client.register_script(READ_SCRIPT)

    def _key(self, kind: str, key: str) -> str:
        return self._store.key("login", kind, key)

    async def put(self, key: str, owner: bytes, body: bytes, until: float) -> bool:
        name, at_ms = self._key("pending", key), int(until * 1000) + 1
        script = self._put
        stored = await self._store.call(
            lambda client: script(keys=[name], args=[owner, body, at_ms], client=client)
        )
        return bool(stored)

    async def read(self, key: str, owner: bytes, *, take: bool) -> Lookup:
        name, script = self._key("pending", key), self._read
        answer = await self._store.call(
            lambda client: script(keys=[name], args=[owner, b"1" if take else b"0"], client=client)
        )
        found = _FOUND[int(answer[0])]
        return Lookup(found, bytes(answer[1]) if found == "owned" else None)

    async def mark(self, key: str, until: float) -> bool:
        name, at_ms = self._key("mark", key), int(until * 1000) + 1
        stored = await self._store.call(lambda client: client.set(name, b"1", nx=True, pxat=at_ms))
        return bool(stored)

    async def marked(self, key: str) -> bool:
        name = self._key("mark", key)
        return bool(await self._store.call(lambda client: client.exists(name)))
