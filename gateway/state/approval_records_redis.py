"""The approval records in Redis, shared by every replica (:mod:`.approval_records` says what a
record is; no key holds a name, a token or an argument)::

    ap:rec:<id>          hash  b: body, bd: binding, a: approver set, e: expiry (ms), s: state,
                               by: the decider's digest (kept KEEP_S past the expiry)
    ap:bind:<binding>    the binding's latest record id
    ap:for:<approvers>   sorted set: record id -> expiry (ms), the pending list of a set

Each transition is one Lua script: it reads the state and the expiry and writes the next state
in the same step, so two replicas never both approve, deny, expire or run one record.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from gateway.state.approval_records import KEEP_S, STATES, StoredApproval
from gateway.state.store import RedisStore

__all__ = ["RedisApprovalStore"]

CREATE_SCRIPT: Final = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'b', ARGV[1], 'bd', ARGV[2], 'a', ARGV[3], 'e', ARGV[4], 's', 'pending')
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
redis.call('SET', KEYS[2], ARGV[6], 'PXAT', ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[6])
redis.call('PEXPIREAT', KEYS[3], ARGV[5])
return 1
"""
"""KEYS: record, binding index, approver set. ARGV: body, binding, approver set, expiry (ms),
keep until (ms), id."""
SETTLE: Final = """
local s = redis.call('HGET', KEYS[1], 's')
if not s then return {0} end
local changed = 0
local due = tonumber(ARGV[1]) >= tonumber(redis.call('HGET', KEYS[1], 'e'))
if (s == 'pending' or s == 'approved') and due then
  s = 'expired'
  redis.call('HSET', KEYS[1], 's', s)
  changed = 1
end
"""
"""Shared head of the transition scripts: the state, expired first when due. ARGV[1]: now (ms)."""
READ: Final = "return {1, changed, s, redis.call('HGET', KEYS[1], 'by') or ''}"
DECIDE_SCRIPT: Final = (
    SETTLE
    + """
if s ~= 'pending' then return {1, 0, s, redis.call('HGET', KEYS[1], 'by') or ''} end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'by', ARGV[3])
return {1, 1, ARGV[2], ARGV[3]}
"""
)
"""ARGV: now (ms), the new state, the decider."""
CONSUME_SCRIPT: Final = (
    SETTLE
    + """
if s ~= 'approved' then return {1, 0, s, ''} end
redis.call('HSET', KEYS[1], 's', 'consumed')
return {1, 1, 'consumed', ''}
"""
)
SETTLE_SCRIPT: Final = SETTLE + READ


def _approvers_key(approvers: str) -> str:
    return hashlib.sha256(approvers.encode()).hexdigest()


class RedisApprovalStore:
    """Every replica's records, under ``<key_prefix>ap:``."""

    def __init__(self, store: RedisStore) -> None:
        self._store = store
        client = store.client
        self._create = client.register_script(CREATE_SCRIPT)
        self._decide = client.register_script(DECIDE_SCRIPT)
        self._consume = client.register_script(CONSUME_SCRIPT)
        self._settle = client.register_script(SETTLE_SCRIPT)

    def _rec(self, record_id: str) -> str:
        return self._store.key("ap", "rec", record_id)

    async def create(self, record: StoredApproval) -> bool:
        keys = [
            self._rec(record.id),
            self._store.key("ap", "bind", record.binding),
            self._store.key("ap", "for", _approvers_key(record.approvers)),
        ]
        expiry_ms = int(record.expires_at * 1000)
        args: list[Any] = [
            record.body,
            record.binding,
            record.approvers,
            expiry_ms,
            int((record.expires_at + KEEP_S) * 1000),
            record.id,
        ]
        script = self._create
        stored = await self._store.call(lambda c: script(keys=keys, args=args, client=c))
        return bool(stored)

    async def get(self, record_id: str) -> StoredApproval | None:
        name = self._rec(record_id)
        found = await self._store.call(lambda c: c.hgetall(name))
        return _record(record_id, found) if found else None

    async def by_binding(self, binding: str) -> StoredApproval | None:
        name = self._store.key("ap", "bind", binding)
        found = await self._store.call(lambda c: c.get(name))
        return None if found is None else await self.get(_text(found))

    async def forget(self, binding: str, record_id: str) -> None:
        name = self._store.key("ap", "bind", binding)
        script = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end"
        await self._store.call(lambda c: c.eval(script, 1, name, record_id))

    async def _transition(
        self, script: Any, record_id: str, args: list[Any]
    ) -> tuple[StoredApproval | None, bool]:
        keys = [self._rec(record_id)]
        answer = await self._store.call(lambda c: script(keys=keys, args=args, client=c))
        if int(answer[0]) == 0:
            return None, False
        record = await self.get(record_id)
        return record, bool(int(answer[1]))

    async def settle(self, record_id: str, now: float) -> tuple[StoredApproval | None, bool]:
        return await self._transition(self._settle, record_id, [int(now * 1000)])

    async def decide(
        self, record_id: str, approved: bool, by: str, now: float
    ) -> tuple[StoredApproval | None, bool]:
        state = "approved" if approved else "denied"
        return await self._transition(self._decide, record_id, [int(now * 1000), state, by])

    async def consume(self, record_id: str, now: float) -> bool:
        _, changed = await self._transition(self._consume, record_id, [int(now * 1000)])
        return changed

    async def pending_for(self, approvers: str, now: float, limit: int) -> list[StoredApproval]:
        name = self._store.key("ap", "for", _approvers_key(approvers))
        now_ms = int(now * 1000)

        async def read(c: Any) -> list[Any]:
            await c.zremrangebyscore(name, "-inf", now_ms)
            return list(await c.zrange(name, 0, limit * 4 - 1))

        ids = await self._store.call(read)
        found: list[StoredApproval] = []
        for raw in ids:
            record = await self.get(_text(raw))
            if record is not None and record.state == "pending" and now < record.expires_at:
                found.append(record)
            if len(found) >= limit:
                break
        return found


def _record(record_id: str, found: dict[Any, Any]) -> StoredApproval:
    fields = {bytes(k).decode(): bytes(v) for k, v in found.items()}
    state = fields["s"].decode()
    return StoredApproval(
        id=record_id,
        binding=fields["bd"].decode(),
        approvers=fields["a"].decode(),
        body=fields["b"],
        expires_at=int(fields["e"]) / 1000.0,
        state=next((known for known in STATES if known == state), "expired"),
        decided_by=fields.get("by", b"").decode(),
    )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
