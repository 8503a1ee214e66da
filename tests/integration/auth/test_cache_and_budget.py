"""ResourceServer against a real loopback issuer: the token cache, single-flight, revocation
window, stale-if-error and the failed-authentication budget."""

from __future__ import annotations

import asyncio

import pytest

from gateway.config import CacheConfig, Rate
from gateway.errors import (
    InvalidToken,
    IssuerUnavailable,
    RateLimited,
)
from gateway.observability.metrics import Metrics
from gateway.seams import AuthRequest
from tests.support.auth import FakeClock, MakeRS, sample
from tests.support.test_issuer import IssuerStub

TOKEN = "tok.valid-0123456789abcdef"


def req(token: str | None = TOKEN, *, ip: str = "192.0.2.10") -> AuthRequest:
    headers = () if token is None else ("Bearer " + token,)
    return AuthRequest(authorization=headers, query_keys=frozenset(), client_ip=ip)


class TestCache:
    async def test_a_cached_token_is_not_introspected_again(
        self, stub: IssuerStub, make_rs: MakeRS, metrics: Metrics
    ) -> None:
        stub.grant(TOKEN)
        rs = await make_rs()
        for _ in range(5):
            await rs.authenticate(req())
        assert stub.introspection_calls == 1
        assert sample(metrics, "token_cache_total", outcome="hit") == 4
        assert sample(metrics, "token_cache_total", outcome="miss") == 1

    async def test_fifty_concurrent_requests_with_one_new_token_cause_one_introspection(
        self, stub: IssuerStub, make_rs: MakeRS, metrics: Metrics
    ) -> None:
        stub.grant(TOKEN)
        stub.fault, stub.slow_s = "slow", 0.2  # keep the flight open while the others arrive
        rs = await make_rs()
        results = await asyncio.gather(*(rs.authenticate(req()) for _ in range(50)))
        assert {p.subject for p in results} == {"alice"}
        assert stub.introspection_calls == 1
        assert sample(metrics, "token_cache_total", outcome="coalesced") == 49

    async def test_concurrent_requests_with_a_bad_token_each_get_their_own_401(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.revoke(TOKEN)
        rs = await make_rs()
        results = await asyncio.gather(
            *(rs.authenticate(req()) for _ in range(10)), return_exceptions=True
        )
        assert all(isinstance(r, InvalidToken) for r in results)
        assert len({id(r) for r in results}) == 10
        assert stub.introspection_calls == 1

    async def test_a_revoked_token_stops_working_within_max_ttl(
        self, stub: IssuerStub, make_rs: MakeRS, clock: FakeClock
    ) -> None:
        stub.grant(TOKEN)
        rs = await make_rs(cache=CacheConfig(max_ttl_s=1))
        await rs.authenticate(req())
        stub.revoke(TOKEN)
        clock.advance(0.9)
        assert (await rs.authenticate(req())).subject == "alice"  # still inside max_ttl
        clock.advance(0.1)
        with pytest.raises(InvalidToken):
            await rs.authenticate(req())
        assert stub.introspection_calls == 2

    async def test_max_ttl_zero_introspects_every_request(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.grant(TOKEN)
        rs = await make_rs(cache=CacheConfig(max_ttl_s=0))
        for _ in range(3):
            await rs.authenticate(req())
        assert stub.introspection_calls == 3

    async def test_a_cached_token_is_not_served_past_exp_plus_the_clock_skew(
        self, stub: IssuerStub, make_rs: MakeRS, clock: FakeClock
    ) -> None:
        # One rule everywhere: a token is valid until exp + issuer.clock_skew_s.
        clock.now = float(int(clock.now))  # exp is whole seconds: start on one
        stub.grant(TOKEN, exp=int(clock.now) + 5)
        rs = await make_rs(cache=CacheConfig(max_ttl_s=60), clock_skew_s=10)
        await rs.authenticate(req())
        clock.advance(14.5)
        await rs.authenticate(req())  # still cached: 0.5 s before exp + skew
        assert stub.introspection_calls == 1
        clock.advance(0.5)
        with pytest.raises(InvalidToken):
            await rs.authenticate(req())  # re-introspected at exp + skew, then refused
        assert stub.introspection_calls == 2

    async def test_negative_results_are_cached_and_bounded(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        rs = await make_rs(
            cache=CacheConfig(negative_ttl_s=10, negative_max_entries=2),
            failed_auth_rate=None,
        )
        for token in ("bad-1", "bad-2", "bad-1", "bad-2"):
            with pytest.raises(InvalidToken):
                await rs.authenticate(req(token))
        assert stub.introspection_calls == 2
        with pytest.raises(InvalidToken):
            await rs.authenticate(req("bad-3"))  # evicts bad-1 (bound: 2 entries)
        with pytest.raises(InvalidToken):
            await rs.authenticate(req("bad-1"))
        assert stub.introspection_calls == 4

    async def test_without_negative_caching_a_bad_token_is_introspected_each_time(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        rs = await make_rs(cache=CacheConfig(negative_ttl_s=0))
        for _ in range(2):
            with pytest.raises(InvalidToken):
                await rs.authenticate(req("bad"))
        assert stub.introspection_calls == 2

    async def test_stale_if_error_serves_the_last_positive_result_while_the_issuer_is_down(
        self, stub: IssuerStub, make_rs: MakeRS, clock: FakeClock, metrics: Metrics
    ) -> None:
        stub.grant(TOKEN)
        rs = await make_rs(cache=CacheConfig(max_ttl_s=1, stale_if_error_s=30))
        await rs.authenticate(req())
        stub.fault = "5xx"
        clock.advance(10)
        assert (await rs.authenticate(req())).subject == "alice"
        assert sample(metrics, "token_cache_total", outcome="stale") == 1
        clock.advance(21)  # past fresh lifetime + stale_if_error
        with pytest.raises(IssuerUnavailable):
            await rs.authenticate(req())

    async def test_stale_if_error_never_serves_past_exp_plus_the_clock_skew(
        self, stub: IssuerStub, make_rs: MakeRS, clock: FakeClock
    ) -> None:
        clock.now = float(int(clock.now))  # exp is whole seconds: start on one
        stub.grant(TOKEN, exp=int(clock.now) + 3)
        rs = await make_rs(cache=CacheConfig(max_ttl_s=1, stale_if_error_s=30), clock_skew_s=2)
        await rs.authenticate(req())
        stub.fault = "5xx"
        clock.advance(4.5)
        await rs.authenticate(req())  # stale, within exp + skew
        clock.advance(0.5)
        with pytest.raises(IssuerUnavailable):
            await rs.authenticate(req())

    async def test_without_stale_if_error_an_outage_is_503_even_for_a_known_token(
        self, stub: IssuerStub, make_rs: MakeRS, clock: FakeClock
    ) -> None:
        stub.grant(TOKEN)
        rs = await make_rs(cache=CacheConfig(max_ttl_s=1))
        await rs.authenticate(req())
        stub.fault = "5xx"
        clock.advance(1)
        with pytest.raises(IssuerUnavailable):
            await rs.authenticate(req())


class TestFailedAuthBudget:
    async def test_after_the_budget_new_tokens_from_that_ip_get_429_without_issuer_calls(
        self, stub: IssuerStub, make_rs: MakeRS, metrics: Metrics, clock: FakeClock
    ) -> None:
        stub.grant(TOKEN)
        rs = await make_rs(failed_auth_rate=Rate(3, 60.0))
        await rs.authenticate(req(ip="198.51.100.7"))  # cached before the spraying starts
        for n in range(4):  # 3 allowed failures, the 4th exhausts the budget
            with pytest.raises(InvalidToken):
                await rs.authenticate(req(f"spray-{n}", ip="198.51.100.7"))
        calls = stub.introspection_calls
        with pytest.raises(RateLimited) as info:
            await rs.authenticate(req("spray-next", ip="198.51.100.7"))
        assert info.value.retry_after is not None and info.value.retry_after >= 1
        assert stub.introspection_calls == calls
        assert sample(metrics, "rate_limited_total", scope="failed_auth") == 1
        # A cached valid token from the same IP still works; other IPs are unaffected.
        assert (await rs.authenticate(req(ip="198.51.100.7"))).subject == "alice"
        with pytest.raises(InvalidToken):
            await rs.authenticate(req("other", ip="203.0.113.9"))
        # The budget recovers with time.
        clock.advance(121)
        with pytest.raises(InvalidToken):
            await rs.authenticate(req("spray-later", ip="198.51.100.7"))

    async def test_concurrent_retries_of_one_bad_token_are_charged_once(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.revoke(TOKEN)
        stub.fault, stub.slow_s = "slow", 0.2  # all 100 join the one flight
        rs = await make_rs(failed_auth_rate=Rate(3, 60.0))
        results = await asyncio.gather(
            *(rs.authenticate(req(ip="198.51.100.7")) for _ in range(100)),
            return_exceptions=True,
        )
        assert all(isinstance(r, InvalidToken) for r in results)
        assert stub.introspection_calls == 1
        stub.fault = None
        # One charge of three: two more distinct bad tokens are still answered by the issuer.
        for n in range(2):
            with pytest.raises(InvalidToken):
                await rs.authenticate(req(f"other-{n}", ip="198.51.100.7"))
        assert stub.introspection_calls == 3

    async def test_malformed_tokens_and_negative_cache_hits_cost_no_budget(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        stub.revoke(TOKEN)
        rs = await make_rs(failed_auth_rate=Rate(2, 60.0), cache=CacheConfig(negative_ttl_s=30))
        with pytest.raises(InvalidToken):
            await rs.authenticate(req(ip="198.51.100.7"))  # one charge: the issuer refused
        for _ in range(20):
            with pytest.raises(InvalidToken):
                await rs.authenticate(req(ip="198.51.100.7"))  # negative-cache hit
            with pytest.raises(InvalidToken):
                await rs.authenticate(req("bad token with spaces", ip="198.51.100.7"))
        stub.grant("fresh-valid")
        assert (await rs.authenticate(req("fresh-valid", ip="198.51.100.7"))).subject == "alice"
        assert stub.introspection_calls == 2

    async def test_a_valid_token_gets_through_an_exhausted_budget_at_the_next_probe(
        self, stub: IssuerStub, make_rs: MakeRS, clock: FakeClock, metrics: Metrics
    ) -> None:
        clock.now = (clock.now // 60 + 1) * 60  # at a window start: the block lasts 60 s
        rs = await make_rs(failed_auth_rate=Rate(3, 60.0), failed_auth_probe_interval_s=5.0)
        for n in range(4):  # a guesser on the shared address spends the whole budget
            with pytest.raises(InvalidToken):
                await rs.authenticate(req(f"spray-{n}", ip="198.51.100.7"))
        stub.grant("fresh-valid", sub="bob")
        with pytest.raises(RateLimited) as info:
            await rs.authenticate(req("fresh-valid", ip="198.51.100.7"))
        # Retry-After points at the next probe, not at the end of the minute.
        assert info.value.retry_after == 5
        calls = stub.introspection_calls
        clock.advance(5)
        principal = await rs.authenticate(req("fresh-valid", ip="198.51.100.7"))
        assert principal.subject == "bob"
        assert stub.introspection_calls == calls + 1
        # Now cached: no budget applies to it any more, while new guesses still wait.
        assert (await rs.authenticate(req("fresh-valid", ip="198.51.100.7"))).subject == "bob"
        with pytest.raises(RateLimited):
            await rs.authenticate(req("spray-next", ip="198.51.100.7"))
        # A probe that the issuer refuses is charged and answered 401 like any refusal.
        clock.advance(5)
        with pytest.raises(InvalidToken):
            await rs.authenticate(req("spray-probe", ip="198.51.100.7"))
        with pytest.raises(RateLimited):
            await rs.authenticate(req("spray-after", ip="198.51.100.7"))

    async def test_with_probes_disabled_the_block_lasts_until_the_budget_recovers(
        self, stub: IssuerStub, make_rs: MakeRS, clock: FakeClock
    ) -> None:
        clock.now = (clock.now // 60 + 1) * 60  # at a window start: the block lasts 60 s
        rs = await make_rs(failed_auth_rate=Rate(2, 60.0), failed_auth_probe_interval_s=0.0)
        for n in range(3):
            with pytest.raises(InvalidToken):
                await rs.authenticate(req(f"spray-{n}", ip="198.51.100.7"))
        stub.grant("fresh-valid")
        for _ in range(3):
            clock.advance(10)
            with pytest.raises(RateLimited) as info:
                await rs.authenticate(req("fresh-valid", ip="198.51.100.7"))
        assert info.value.retry_after is not None and info.value.retry_after > 5

    async def test_ipv6_clients_share_one_budget_per_64(
        self, stub: IssuerStub, make_rs: MakeRS
    ) -> None:
        rs = await make_rs(failed_auth_rate=Rate(2, 60.0))
        for n, ip in enumerate(["2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2::3"]):
            with pytest.raises(InvalidToken):
                await rs.authenticate(req(f"spray-{n}", ip=ip))
        with pytest.raises(RateLimited):
            await rs.authenticate(req("spray-3", ip="2001:db8:1:2:abcd::77"))
        with pytest.raises(InvalidToken):  # another /64 has its own budget
            await rs.authenticate(req("spray-4", ip="2001:db8:1:3::1"))
