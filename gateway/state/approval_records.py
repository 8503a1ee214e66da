"""The approval records of calls a policy rule holds for a person's approval (``approval:``,
docs/policy.md#approvals), in the shared store.

A record is created by the MCP side (``gateway/approvals``) for one exact call and names it by
its *binding*: a digest of {issuer, subject, client, backend, tool, the arguments' canonical
JSON SHA-256, policy version, catalog pin}. Its ``body`` (the approvals layer's canonical JSON:
the binding's fields, who may approve, the redacted preview and its hash, the times) never
changes; its state does, one way only::

    pending -> approved | denied | expired;  approved -> consumed | expired

Every transition is one step of the store (:meth:`ApprovalStore.decide`,
:meth:`ApprovalStore.consume`, :meth:`ApprovalStore.settle`): on Redis a Lua script, so of two
replicas racing to decide or to run an approved call exactly one wins. A record is kept
:data:`KEEP_S` past its expiry so that a late retry is told *expired* or *used*, not *unknown*.
Two indexes: the binding's latest record (a client that cannot carry a sealed state retries the
same call and finds its approval), and per approver set the records waiting for it (the list
page).

:class:`MemoryApprovalStore` is one replica's (``state.backend: memory``);
:class:`~gateway.state.approval_records_redis.RedisApprovalStore` every replica's. Redis calls
raise :class:`~gateway.state.store.StoreUnavailable`: approvals fail closed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, Literal, Protocol

from gateway.bounded import BoundedMap

__all__ = [
    "KEEP_S",
    "MAX_RECORDS",
    "ApprovalStore",
    "MemoryApprovalStore",
    "State",
    "StoredApproval",
]

State = Literal["pending", "approved", "denied", "expired", "consumed"]
STATES: Final[tuple[State, ...]] = ("pending", "approved", "denied", "expired", "consumed")
KEEP_S: Final = 3600.0
"""How long a record outlives its expiry (to answer a late retry precisely)."""
MAX_RECORDS: Final = 100_000
"""Records one replica keeps in memory; past it the oldest go."""


@dataclass(frozen=True, slots=True)
class StoredApproval:
    """One record as the store holds it."""

    id: str
    binding: str
    approvers: str
    """The approver set's key: ``self`` records are listed for nobody but their caller."""
    body: bytes
    expires_at: float
    state: State = "pending"
    decided_by: str = ""
    """The decider's digest (approved or denied), empty before."""


class ApprovalStore(Protocol):
    async def create(self, record: StoredApproval) -> bool:
        """Store a new pending record and point its binding and its approver set at it; False
        when ``record.id`` exists."""
        ...

    async def get(self, record_id: str) -> StoredApproval | None: ...

    async def by_binding(self, binding: str) -> StoredApproval | None:
        """The binding's latest record (None: none kept)."""
        ...

    async def forget(self, binding: str, record_id: str) -> None:
        """Drop the binding's index entry if it still points at ``record_id``."""
        ...

    async def settle(self, record_id: str, now: float) -> tuple[StoredApproval | None, bool]:
        """The record, expired first when its time has passed while pending or approved;
        whether this call expired it (so the event is written once)."""
        ...

    async def decide(
        self, record_id: str, approved: bool, by: str, now: float
    ) -> tuple[StoredApproval | None, bool]:
        """Approve or deny a pending, unexpired record; whether this call decided it."""
        ...

    async def consume(self, record_id: str, now: float) -> bool:
        """approved -> consumed, if unexpired; whether this call did it (the one run)."""
        ...

    async def pending_for(self, approvers: str, now: float, limit: int) -> list[StoredApproval]:
        """Pending, unexpired records of an approver set, oldest first."""
        ...


class MemoryApprovalStore:
    """One replica's records."""

    def __init__(
        self, *, max_entries: int = MAX_RECORDS, clock: Callable[[], float] = time.time
    ) -> None:
        self._records: BoundedMap[str, StoredApproval] = BoundedMap(max_entries)
        self._bindings: BoundedMap[str, str] = BoundedMap(max_entries)
        self._clock = clock

    async def create(self, record: StoredApproval) -> bool:
        now = self._clock()
        if self._records.peek(record.id, now) is not None:
            return False
        keep = record.expires_at + KEEP_S
        self._records.put(record.id, record, keep)
        self._bindings.put(record.binding, record.id, keep)
        self._records.trim(now)
        self._bindings.trim(now)
        return True

    async def get(self, record_id: str) -> StoredApproval | None:
        return self._records.peek(record_id, self._clock())

    async def by_binding(self, binding: str) -> StoredApproval | None:
        found = self._bindings.peek(binding, self._clock())
        return None if found is None else await self.get(found)

    async def forget(self, binding: str, record_id: str) -> None:
        if self._bindings.peek(binding, self._clock()) == record_id:
            self._bindings.pop(binding)

    def _set(self, record: StoredApproval) -> None:
        self._records.put(record.id, record, record.expires_at + KEEP_S)

    async def settle(self, record_id: str, now: float) -> tuple[StoredApproval | None, bool]:
        record = await self.get(record_id)
        if record is None or record.state not in ("pending", "approved"):
            return record, False
        if now < record.expires_at:
            return record, False
        record = replace(record, state="expired")
        self._set(record)
        return record, True

    async def decide(
        self, record_id: str, approved: bool, by: str, now: float
    ) -> tuple[StoredApproval | None, bool]:
        record, _ = await self.settle(record_id, now)
        if record is None or record.state != "pending":
            return record, False
        record = replace(record, state="approved" if approved else "denied", decided_by=by)
        self._set(record)
        return record, True

    async def consume(self, record_id: str, now: float) -> bool:
        record, _ = await self.settle(record_id, now)
        if record is None or record.state != "approved":
            return False
        self._set(replace(record, state="consumed"))
        return True

    async def pending_for(self, approvers: str, now: float, limit: int) -> list[StoredApproval]:
        found = [
            record
            for key in list(self._records)
            if (record := self._records.peek(key, now)) is not None
            and record.approvers == approvers
            and record.state == "pending"
            and now < record.expires_at
        ]
        found.sort(key=lambda record: record.expires_at)
        return found[:limit]
