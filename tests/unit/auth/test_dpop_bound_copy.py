"""The DPoP guard's principal for a bound token: made once per principal, held by the guard's
own bounded owner (:class:`gateway.seams.PrincipalFacts`), never written onto the principal."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import pytest

from gateway.auth.dpop import Proof
from gateway.auth.dpop_guard import DpopGuard
from gateway.config import load_config
from gateway.seams import Principal, PrincipalFacts
from tests.support.config_files import FIXTURES, write_config_text

ENV = {"TEST_INTROSPECTION_SECRET": "secret", "TEST_BACKEND_TOKEN": "backend"}
JKT = "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"


def guard(tmp_path: Path, max_entries: int) -> DpopGuard:
    text = (FIXTURES / "minimal.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "  client_id: mcp-gateway\n",
        f"  client_id: mcp-gateway\n  dpop: {{mode: allowed}}\n"
        f"  cache: {{max_entries: {max_entries}}}\n",
    )
    return DpopGuard(load_config(write_config_text(tmp_path, text), ENV), replays=None)


def bound(subject: str) -> Principal:
    return Principal(
        subject=subject,
        client_id="cli",
        scopes=frozenset({"mcp:access"}),
        expires_at=math.inf,
        issuer="https://id.example.com",
        fingerprint="fp",
        binding=JKT,
    )


def proof() -> Proof:
    return Proof(jkt=JKT, alg="ES256", jti="j", iat=time.time(), nonce=None)


async def test_a_bound_principal_is_copied_once_with_its_dpop_method(tmp_path: Path) -> None:
    dpop = guard(tmp_path, max_entries=2)
    alice = bound("alice")
    first = await dpop.admit(alice, proof())
    assert first.auth_method == "introspection+dpop" and first is not alice
    assert await dpop.admit(alice, proof()) is first  # the same copy: derived state stays too


async def test_the_copies_are_bounded_by_the_issuers_caches(tmp_path: Path) -> None:
    dpop = guard(tmp_path, max_entries=2)
    alice, bob, carol = bound("alice"), bound("bob"), bound("carol")
    copies = {p.subject: await dpop.admit(p, proof()) for p in (alice, bob, carol)}
    assert await dpop.admit(carol, proof()) is copies["carol"]
    assert await dpop.admit(alice, proof()) is not copies["alice"]  # the least recent went


def test_principal_facts_keep_one_fact_per_principal_object_least_recent_out() -> None:
    facts: PrincipalFacts[str] = PrincipalFacts(2)
    derived: list[str] = []

    def derive(principal: Principal) -> str:
        derived.append(principal.subject)
        return principal.subject.upper()

    alice, bob = bound("alice"), bound("bob")
    twin = dataclasses.replace(alice)  # equal, but another object: facts of its own
    assert facts.of(alice, derive) == "ALICE" and facts.of(alice, derive) == "ALICE"
    assert facts.of(twin, derive) == "ALICE" and twin in facts
    assert facts.of(bob, derive) == "BOB"
    assert alice not in facts and len(facts) == facts.max_entries == 2
    assert derived == ["alice", "alice", "bob"]
    with pytest.raises(ValueError):
        PrincipalFacts[str](0)
