"""The approval records (gateway/state/approval_records*.py), in one replica's memory and in a
real redis-server where two stores stand for two replicas: the state machine goes one way,
every transition happens once however many replicas race for it, expiry is a state, and the
indexes (a binding's latest record, an approver set's pending list) follow."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from gateway.state.approval_records import (
    ApprovalStore,
    MemoryApprovalStore,
    StoredApproval,
)
from gateway.state.approval_records_redis import RedisApprovalStore
from tests.integration.state.test_redis_limits import store_for
from tests.support.redis_server import RedisServer, redis_server, unique_prefix

__all__ = ["redis_server"]


def record(record_id: str = "r1", *, ttl: float = 60, approvers: str = "g=ops") -> StoredApproval:
    return StoredApproval(
        id=record_id,
        binding="b-" + record_id,
        approvers=approvers,
        body=b'{"tool":"pay"}',
        expires_at=time.time() + ttl,
    )


@pytest.fixture(params=["memory", "redis"])
async def replicas(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[ApprovalStore, ApprovalStore]]:
    if request.param == "memory":
        one = MemoryApprovalStore()
        yield one, one
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    prefix = unique_prefix()
    a, b = store_for(server.url, prefix), store_for(server.url, prefix)
    try:
        yield RedisApprovalStore(a), RedisApprovalStore(b)
    finally:
        await a.close()
        await b.close()


async def test_a_record_is_created_once_and_found_by_id_and_binding(
    replicas: tuple[ApprovalStore, ApprovalStore],
) -> None:
    a, b = replicas
    assert await a.create(record())
    assert not await b.create(replace(record(), body=b"other"))  # never overwritten
    found = await b.get("r1")
    assert found is not None and found.state == "pending" and found.body == b'{"tool":"pay"}'
    assert found.approvers == "g=ops" and found.binding == "b-r1"
    assert abs(found.expires_at - record().expires_at) < 1
    assert (await b.by_binding("b-r1")) == found
    await b.forget("b-r1", "another")  # only the record it points at is forgotten
    assert await a.by_binding("b-r1") is not None
    await b.forget("b-r1", "r1")
    assert await a.by_binding("b-r1") is None and await a.get("r1") is not None
    assert await a.get("nope") is None and await a.by_binding("nope") is None


async def test_one_decision_then_one_run_across_replicas(
    replicas: tuple[ApprovalStore, ApprovalStore],
) -> None:
    a, b = replicas
    await a.create(record())
    now = time.time()
    assert not await a.consume("r1", now)  # pending: nothing runs
    decisions = await asyncio.gather(
        *(store.decide("r1", i % 2 == 0, f"p{i}", now) for i, store in enumerate((a, b) * 5))
    )
    winners = [found for found, changed in decisions if changed]
    assert len(winners) == 1 and winners[0] is not None
    decided = await b.get("r1")
    assert decided is not None and decided.state in ("approved", "denied")
    assert decided.decided_by == winners[0].decided_by
    if decided.state == "denied":
        return
    runs = await asyncio.gather(*(store.consume("r1", now) for store in (a, b) * 10))
    assert runs.count(True) == 1
    after = await a.get("r1")
    assert after is not None and after.state == "consumed"
    assert (await b.decide("r1", False, "late", now)) == (after, False)


async def test_an_approved_record_runs_and_a_denied_one_never(
    replicas: tuple[ApprovalStore, ApprovalStore],
) -> None:
    a, b = replicas
    await a.create(record("yes"))
    await a.create(record("no"))
    now = time.time()
    assert (await b.decide("yes", True, "ann", now))[1]
    assert (await b.decide("no", False, "ann", now))[1]
    assert await a.consume("yes", now) and not await b.consume("yes", now)
    assert not await a.consume("no", now)
    denied = await a.get("no")
    assert denied is not None and denied.state == "denied" and denied.decided_by == "ann"


async def test_expiry_is_a_state_reached_once(
    replicas: tuple[ApprovalStore, ApprovalStore],
) -> None:
    a, b = replicas
    await a.create(record("p", ttl=0.3))
    await a.create(record("ok", ttl=0.3))
    await b.decide("ok", True, "ann", time.time())
    later = time.time() + 1
    assert not (await a.decide("p", True, "ann", later))[1]  # too late to approve
    assert (await b.get("p")).state == "expired"  # type: ignore[union-attr]
    settled, changed = await a.settle("ok", later)
    assert changed and settled is not None and settled.state == "expired"
    assert not (await b.settle("ok", later))[1]  # expired once
    assert not await b.consume("ok", later)


async def test_an_approver_sets_pending_list(
    replicas: tuple[ApprovalStore, ApprovalStore],
) -> None:
    a, b = replicas
    await a.create(record("first", ttl=30))
    await a.create(record("second", ttl=60))
    await a.create(record("other", approvers="g=finance"))
    await a.create(record("gone", ttl=0.2))
    now = time.time()
    await a.decide("second", True, "ann", now)
    await asyncio.sleep(0.3)
    listed = await b.pending_for("g=ops", time.time(), 10)
    assert [found.id for found in listed] == ["first"]
    assert [found.id for found in await b.pending_for("g=finance", time.time(), 10)] == ["other"]
    assert await b.pending_for("g=none", time.time(), 10) == []
