"""The AuthZEN client (``gateway/pdp/authzen.py``) against the tests' real AuthZEN server: the
decision cache at and past its bounds (entries, TTL), single-flight, and a deadline already
spent. The HTTP surface is covered by tests/integration/policy/test_policy_external_http.py."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.config import PdpCredential, PolicyExternalConfig, Secret, load_config
from gateway.errors import ExternalPolicyDenied, PolicyUnavailable
from gateway.outbound.client import Outbound
from gateway.pdp.authzen import AuthZenDecisionPoint
from gateway.seams import AccessQuestion, Principal, RequestContext
from gateway.wiring.production import build_services
from tests.support.authzen_pdp import AuthZenPdp, authzen_pdp


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _principal(sub: str = "erin") -> Principal:
    return Principal(sub, "cli", frozenset({"mcp:access"}), time.time() + 300, "https://id", "fp")


def _ctx() -> RequestContext:
    return RequestContext("r", "t", "s", time.monotonic(), "127.0.0.1")


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asks (``gateway.seams.Asking``), as a route's turn hands it to the decision point."""

    principal: Principal
    ctx: RequestContext
    deadline: float


@pytest.fixture
async def client(
    aiohttp_server: Callable[..., Any],
) -> AsyncIterator[Callable[..., tuple[AuthZenDecisionPoint, AuthZenPdp, Clock]]]:
    outbound = Outbound()
    async with authzen_pdp(
        aiohttp_server, AuthZenPdp(rule=lambda b: b["resource"]["id"] != "no")
    ) as pdp:

        def make(**settings: Any) -> tuple[AuthZenDecisionPoint, AuthZenPdp, Clock]:
            clock = Clock()
            config = PolicyExternalConfig(url=pdp.url, **settings)
            return (
                AuthZenDecisionPoint(config, "https://mcp.test/mcp", outbound, clock=clock),
                pdp,
                clock,
            )

        yield make
    await outbound.close()


async def _ask(point: AuthZenDecisionPoint, tool: str, sub: str = "erin") -> None:
    question = AccessQuestion("tools/call", tool, "default", {})
    await point.consult(Asker(_principal(sub), _ctx(), time.monotonic() + 5), question)


async def test_the_cache_holds_at_most_max_entries_least_recently_used_out(
    client: Callable[..., tuple[AuthZenDecisionPoint, AuthZenPdp, Clock]],
) -> None:
    point, pdp, _ = client(cache_max_entries=2)
    for tool in ("a", "b"):
        await _ask(point, tool)
    assert (len(point), len(pdp.seen)) == (2, 2)  # at the bound
    await _ask(point, "a")  # a hit, and now the most recently used
    await _ask(point, "c")  # one past the bound: b goes
    assert (len(point), len(pdp.seen)) == (2, 3)
    await _ask(point, "a")
    assert len(pdp.seen) == 3
    await _ask(point, "b")
    assert len(pdp.seen) == 4


async def test_a_decision_lives_ttl_s_allow_and_deny_alike(
    client: Callable[..., tuple[AuthZenDecisionPoint, AuthZenPdp, Clock]],
) -> None:
    point, pdp, clock = client(cache_ttl_s=10)
    await _ask(point, "yes")
    for _ in range(2):
        with pytest.raises(ExternalPolicyDenied):
            await _ask(point, "no")
    assert len(pdp.seen) == 2
    clock.now += 9.99
    await _ask(point, "yes")
    assert len(pdp.seen) == 2
    clock.now += 0.01  # exactly ttl_s later: asked again
    await _ask(point, "yes")
    with pytest.raises(ExternalPolicyDenied):
        await _ask(point, "no")
    assert len(pdp.seen) == 4


async def test_concurrent_identical_questions_share_one_request(
    client: Callable[..., tuple[AuthZenDecisionPoint, AuthZenPdp, Clock]],
) -> None:
    point, pdp, _ = client(cache_ttl_s=0)
    pdp.faults.delay_s = 0.2
    await asyncio.gather(*(_ask(point, "x") for _ in range(5)), _ask(point, "x", sub="other"))
    assert len(pdp.seen) == 2  # one per distinct question, though nothing is cached
    assert point.requests == 2


async def test_a_deadline_already_spent_asks_nobody_and_fails_closed(
    client: Callable[..., tuple[AuthZenDecisionPoint, AuthZenPdp, Clock]],
) -> None:
    point, pdp, _ = client(retry_after_s=7)
    ctx = _ctx()
    with pytest.raises(PolicyUnavailable) as info:
        spent = Asker(_principal(), ctx, time.monotonic() - 0.1)
        await point.consult(spent, AccessQuestion("tools/call", "x"))
    assert info.value.retry_after == 7
    assert pdp.seen == [] and ctx.extra["pdp"] == {"decision": "error", "cached": False}


async def test_the_request_is_canonical_and_an_integer_past_64_bits_still_serialises(
    client: Callable[..., tuple[AuthZenDecisionPoint, AuthZenPdp, Clock]],
) -> None:
    point, _, _ = client(send_arguments=True)
    one = AccessQuestion("tools/call", "x", "default", {"b": 1, "a": [1, 2]})
    other = AccessQuestion("tools/call", "x", "default", {"a": [1, 2], "b": 1})
    assert point.request_body(_principal(), one) == point.request_body(_principal(), other)
    big = AccessQuestion("tools/call", "x", "default", {"n": 2**70})
    assert b'"n":1180591620717411303424' in point.request_body(_principal(), big)


def test_the_services_are_built_before_the_event_loop_runs(tmp_path: Path) -> None:
    # `mcp-gateway serve` wires everything first, then starts the loop: the decision point's
    # connection pool (an aiohttp session, which needs the loop) is made on first use.
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "config"
    shutil.copy(fixtures / "policy.yaml", tmp_path / "policy.yaml")
    section = "policy_external: {url: 'http://127.0.0.1:9/e', allow_insecure_http: true}\n"
    (tmp_path / "gateway.yaml").write_text((fixtures / "minimal.yaml").read_text() + section)
    env = {"TEST_INTROSPECTION_SECRET": "s", "TEST_BACKEND_TOKEN": "t"}
    services = build_services(load_config(tmp_path / "gateway.yaml", env))
    assert services.cleanups  # built, with the decision point's close among them


async def test_a_rotated_credential_file_is_sent_from_the_next_request_on(
    client: Callable[..., tuple[AuthZenDecisionPoint, AuthZenPdp, Clock]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Secret, "RECHECK_S", 0.0)
    path = tmp_path / "pdp-token"
    path.write_text("first\n")
    secret = Secret("first", f"file:{path}", path.stat().st_mtime)
    point, pdp, _ = client(credential=PdpCredential("bearer", token=secret))
    await _ask(point, "a")
    path.write_text("second\n")
    os.utime(path, (time.time() + 5, time.time() + 5))  # a new mtime even on a coarse clock
    await _ask(point, "b")
    assert [s.headers["Authorization"] for s in pdp.seen] == ["Bearer first", "Bearer second"]
