"""Token cache: SHA-256 keys, min(exp, max_ttl) lifetime, LRU bounds, negative and stale entries."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from gateway.auth.cache import SingleFlight, TokenCache, token_digest
from gateway.config import CacheConfig
from gateway.seams import Principal

NOW = 1_000.0


def principal(exp: float = NOW + 3600) -> Principal:
    return Principal("alice", "c", frozenset({"s"}), exp, "https://id.example.com", "fp")


def key(n: int) -> bytes:
    return token_digest(f"token-{n}")[0]


def test_the_key_is_the_sha256_of_the_token_and_the_fingerprint_its_12_hex_prefix() -> None:
    digest, fingerprint = token_digest("abc")
    assert digest == hashlib.sha256(b"abc").digest()
    assert fingerprint == hashlib.sha256(b"abc").hexdigest()[:12]


class TestPositive:
    def test_an_entry_is_fresh_until_max_ttl(self) -> None:
        cache = TokenCache(CacheConfig(max_ttl_s=60))
        cache.store(key(1), principal(), NOW)
        assert cache.lookup(key(1), NOW + 59.9).principal is not None
        assert cache.lookup(key(1), NOW + 60).principal is None
        assert len(cache) == 0

    def test_an_entry_never_outlives_the_token_exp(self) -> None:
        cache = TokenCache(CacheConfig(max_ttl_s=60))
        cache.store(key(1), principal(exp=NOW + 10), NOW)
        assert cache.lookup(key(1), NOW + 9.9).principal is not None
        assert cache.lookup(key(1), NOW + 10).principal is None

    def test_max_ttl_zero_disables_caching(self) -> None:
        cache = TokenCache(CacheConfig(max_ttl_s=0))
        cache.store(key(1), principal(), NOW)
        assert len(cache) == 0

    def test_the_least_recently_used_entry_is_evicted_at_max_entries(self) -> None:
        cache = TokenCache(CacheConfig(max_entries=2))
        cache.store(key(1), principal(), NOW)
        cache.store(key(2), principal(), NOW)
        assert cache.lookup(key(1), NOW).principal is not None  # 1 is now most recent
        cache.store(key(3), principal(), NOW)
        assert len(cache) == 2
        assert cache.lookup(key(2), NOW).principal is None
        assert cache.lookup(key(1), NOW).principal is not None


class TestStale:
    def test_stale_if_error_keeps_an_entry_past_its_lifetime_but_not_past_exp(self) -> None:
        cache = TokenCache(CacheConfig(max_ttl_s=60, stale_if_error_s=300))
        cache.store(key(1), principal(exp=NOW + 200), NOW)
        assert cache.lookup(key(1), NOW + 61).principal is None
        assert cache.stale(key(1), NOW + 199) is not None
        assert cache.stale(key(1), NOW + 200) is None

    def test_without_stale_if_error_nothing_is_served_stale(self) -> None:
        cache = TokenCache(CacheConfig(max_ttl_s=60))
        cache.store(key(1), principal(), NOW)
        assert cache.stale(key(1), NOW + 60) is None


class TestNegative:
    def test_negative_caching_is_on_by_default_for_five_seconds(self) -> None:
        cache = TokenCache(CacheConfig())
        cache.store_negative(key(1), NOW)
        assert cache.lookup(key(1), NOW + 4.9).negative
        assert not cache.lookup(key(1), NOW + 5).negative

    def test_zero_turns_negative_caching_off(self) -> None:
        cache = TokenCache(CacheConfig(negative_ttl_s=0))
        cache.store_negative(key(1), NOW)
        assert not cache.lookup(key(1), NOW).negative

    def test_a_negative_entry_lives_negative_ttl(self) -> None:
        cache = TokenCache(CacheConfig(negative_ttl_s=5))
        cache.store_negative(key(1), NOW)
        assert cache.lookup(key(1), NOW + 4.9).negative
        assert not cache.lookup(key(1), NOW + 5).negative

    def test_negative_entries_are_bounded_at_the_limit_and_one_past(self) -> None:
        cache = TokenCache(CacheConfig(negative_ttl_s=5, negative_max_entries=3))
        for n in range(3):
            cache.store_negative(key(n), NOW)
        assert cache.negative_size == 3
        cache.store_negative(key(3), NOW)
        assert cache.negative_size == 3
        assert not cache.lookup(key(0), NOW).negative

    def test_a_refusal_replaces_an_acceptance(self) -> None:
        cache = TokenCache(CacheConfig(negative_ttl_s=5))
        cache.store(key(1), principal(), NOW)
        cache.store_negative(key(1), NOW + 1)
        assert cache.lookup(key(1), NOW + 1).negative


@pytest.mark.parametrize(
    "settings",
    [CacheConfig(max_ttl_s=-1), CacheConfig(max_entries=0), CacheConfig(negative_max_entries=0)],
    ids=["negative ttl", "zero entries", "zero negative entries"],
)
def test_invalid_settings_are_refused(settings: CacheConfig) -> None:
    with pytest.raises(ValueError, match="cache"):
        TokenCache(settings)


async def test_single_flight_runs_the_work_once_for_concurrent_callers() -> None:
    flights: SingleFlight[int] = SingleFlight()
    calls = 0
    gate = asyncio.Event()

    async def work() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        return 42

    first = flights.start(b"k", work)
    joined = [flights.joining(b"k") for _ in range(10)]
    assert all(task is first for task in joined)
    gate.set()
    assert await first == 42
    await asyncio.sleep(0)
    assert calls == 1
    assert flights.joining(b"k") is None


async def test_a_cancelled_waiter_does_not_cancel_the_shared_work() -> None:
    flights: SingleFlight[int] = SingleFlight()
    gate = asyncio.Event()

    async def work() -> int:
        await gate.wait()
        return 7

    task = flights.start(b"k", work)
    waiter = asyncio.ensure_future(asyncio.shield(task))
    await asyncio.sleep(0)
    waiter.cancel()
    gate.set()
    assert await task == 7


def test_every_way_an_accepted_entry_leaves_reports_its_digest() -> None:
    """What was derived from a token (exchanged tokens, reusable assertions) goes with it."""
    dropped: list[bytes] = []
    cache = TokenCache(
        CacheConfig(max_ttl_s=60, max_entries=2, negative_ttl_s=30), on_drop=dropped.append
    )
    for n in range(3):  # the third evicts the first (LRU)
        cache.store(key(n), principal(), NOW)
    assert dropped == [key(0)]
    assert cache.lookup(key(1), NOW + 61).principal is None  # expired: gone
    assert dropped[-1] == key(1)
    cache.store_negative(key(2), NOW)  # a refusal supersedes the acceptance
    assert dropped[-1] == key(2)
    cache.store(key(3), principal(), NOW)
    cache.forget(key(3))
    assert dropped[-1] == key(3)
    cache.store(key(4), principal(), NOW)
    cache.clear()
    assert dropped[-1] == key(4)
    before = len(dropped)
    cache.forget(key(9))  # never cached: nothing to report
    cache.store(key(5), principal(), NOW)
    cache.store(key(5), principal(), NOW + 1)  # replaced, not dropped
    assert len(dropped) == before


class TestRevocationKeys:
    def test_a_revocation_drops_every_spelling_and_only_those(self) -> None:
        dropped: list[bytes] = []
        cache = TokenCache(CacheConfig(max_ttl_s=60), on_drop=dropped.append)
        revoked, kept = b"r" * 32, b"k" * 32
        cache.store(key(1), principal(), NOW, revocation_key=revoked)
        cache.store(key(2), principal(), NOW, revocation_key=revoked)
        cache.store(key(3), principal(), NOW, revocation_key=kept)
        cache.store(key(4), principal(), NOW)  # an opaque token: its digest is its key
        assert cache.lookup(key(1), NOW).revocation_key == revoked
        assert cache.lookup(key(4), NOW).revocation_key == key(4)
        cache.forget_revoked(revoked)
        assert sorted(dropped) == sorted([key(1), key(2)])
        assert cache.lookup(key(1), NOW).principal is None
        assert cache.lookup(key(3), NOW).principal is not None
        cache.forget_revoked(key(4))
        assert cache.lookup(key(4), NOW).principal is None

    def test_the_index_follows_evictions(self) -> None:
        cache = TokenCache(CacheConfig(max_ttl_s=60, max_entries=1))
        cache.store(key(1), principal(), NOW, revocation_key=b"a" * 32)
        cache.store(key(2), principal(), NOW, revocation_key=b"b" * 32)  # evicts key(1)
        cache.store(key(2), principal(), NOW, revocation_key=b"c" * 32)  # re-keyed
        assert cache._by_revocation == {b"c" * 32: {key(2)}}
        cache.store_negative(key(2), NOW)
        assert cache._by_revocation == {}
