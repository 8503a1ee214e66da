"""Property tests: no scope set ever grants a tool whose required scopes are not all present.

Random policies go through the real loader (YAML on disk), random principals through the real
evaluator. Besides soundness, the step-up promise is checked: adding exactly the missing scopes
lets the caller in, in one round, and visibility never depends on the scopes a token carries.
"""

from __future__ import annotations

import math
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.policy.glob import Glob, overlap
from gateway.policy.policy_loader import load_policy
from gateway.policy.policy_set import PolicySet
from gateway.policy.rules import Rule
from gateway.seams import Principal

SCOPES = [f"s{i}" for i in range(6)]
KEYS = ["t1", "t2", "t*", "t?", "*", "u*1"]
"""No two of these tie (the loader would reject the policy)."""
NAMES = ["t1", "t2", "tx", "t10", "u1", "ux1", "v", ""]
CLIENTS = ["c1", "c2"]
SUBJECTS = ["alice", "bob@example.com", "carol"]

scope_sets = st.lists(st.sampled_from(SCOPES), unique=True, max_size=4)

rules = st.fixed_dictionaries(
    {"scopes": scope_sets},
    optional={
        "any_of": st.lists(
            st.lists(st.sampled_from(SCOPES), unique=True, min_size=1, max_size=3),
            min_size=1,
            max_size=3,
        ),
        "clients": st.lists(st.sampled_from(CLIENTS), unique=True, min_size=1),
        "subjects": st.lists(
            st.sampled_from(["alice", "*@example.com", "c?rol"]), unique=True, min_size=1
        ),
        "deny": st.booleans(),
    },
)
policies = st.fixed_dictionaries(
    {
        "version": st.just(1),
        "baseline_scopes": st.lists(st.sampled_from(SCOPES), unique=True, min_size=1, max_size=2),
        "tools": st.dictionaries(st.sampled_from(KEYS), rules, max_size=len(KEYS)),
    }
)
principals = st.builds(
    lambda scopes, client, sub: Principal(sub, client, frozenset(scopes), math.inf, "i", "fp"),
    st.sets(st.sampled_from(SCOPES)),
    st.sampled_from([*CLIENTS, None]),
    st.sampled_from(SUBJECTS),
)


def _load(raw: dict[str, Any]) -> PolicySet:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "policy.yaml"
        path.write_text(yaml.safe_dump(raw), encoding="utf-8")
        return load_policy([path])


def _needs(baseline: tuple[str, ...], rule: Rule, granted: frozenset[str]) -> bool:
    """The specification, written independently of the evaluator."""
    if not set(baseline) <= granted or not set(rule.scopes) <= granted:
        return False
    return not rule.any_of or any(set(alt) <= granted for alt in rule.any_of)


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(policies, st.lists(principals, min_size=1, max_size=4))
def test_no_scope_set_grants_a_tool_whose_required_scopes_are_missing(
    raw: dict[str, Any], callers: list[Principal]
) -> None:
    policy = _load(raw)
    for caller in callers:
        for name in NAMES:
            decision = policy.decide_tool(caller, name)
            rule = policy.rule_for(name)
            if decision.allowed:
                assert rule is not None and not rule.deny
                assert _needs(policy.baseline_scopes, rule, caller.scopes)
                assert set(decision.required_scopes) <= caller.scopes
                assert set(policy.baseline_scopes) <= set(decision.required_scopes)
            elif rule is not None and decision.visible:
                # Fail only for scopes: the conditions hold, the scopes do not.
                assert not _needs(policy.baseline_scopes, rule, caller.scopes)


@FAST
@given(policies, principals)
def test_adding_the_missing_scopes_lets_the_caller_in_in_one_round(
    raw: dict[str, Any], caller: Principal
) -> None:
    policy = _load(raw)
    for name in NAMES:
        decision = policy.decide_tool(caller, name)
        if decision.allowed or not decision.visible:
            continue
        assert decision.missing_scopes
        assert set(decision.missing_scopes) <= set(decision.required_scopes)
        assert set(policy.baseline_scopes) <= set(decision.required_scopes)
        assert set(decision.required_scopes) - set(decision.missing_scopes) <= caller.scopes
        stepped = Principal(
            caller.subject,
            caller.client_id,
            caller.scopes | set(decision.missing_scopes),
            math.inf,
            "i",
            "fp",
        )
        assert policy.decide_tool(stepped, name).allowed


@FAST
@given(policies, principals, st.sets(st.sampled_from(SCOPES)))
def test_visibility_never_depends_on_the_scopes_a_token_carries(
    raw: dict[str, Any], caller: Principal, other_scopes: set[str]
) -> None:
    policy = _load(raw)
    other = Principal(caller.subject, caller.client_id, frozenset(other_scopes), math.inf, "i", "")
    for name in NAMES:
        assert policy.decide_tool(caller, name).visible == policy.decide_tool(other, name).visible


patterns = st.text(alphabet="ab*?", max_size=4)


@settings(max_examples=400, deadline=None)
@given(patterns, patterns)
def test_overlap_finds_a_common_name_exactly_when_one_exists(first: str, second: str) -> None:
    witness = overlap(first, second)
    if witness is not None:
        assert Glob(first).matches(witness) and Glob(second).matches(witness)
        return
    # Brute force over every short name of the alphabet plus an outside character: a common
    # name, if any, exists of length <= len(first) + len(second).
    limit = len(first) + len(second)
    frontier = [""]
    for _ in range(limit + 1):
        for name in frontier:
            assert not (Glob(first).matches(name) and Glob(second).matches(name)), name
        frontier = [name + char for name in frontier for char in "abx"]


def _reference(pattern: str) -> re.Pattern[str]:
    """The pattern language as a regex (exact, but backtracking: a reference for tests)."""
    text = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(text, re.DOTALL)


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet="ab*?\n", max_size=7), st.text(alphabet="ab\n", max_size=9))
def test_glob_matches_exactly_the_names_its_pattern_describes(pattern: str, name: str) -> None:
    assert Glob(pattern).matches(name) == (_reference(pattern).fullmatch(name) is not None)


def test_glob_takes_no_time_to_refuse_a_long_name_with_many_stars() -> None:
    # A backtracking regex takes about 25 s on 800 characters here (the time grows with the
    # fourth power of the length); names reach a glob from callers (issue 43).
    began = time.perf_counter()
    assert not Glob("*a*a*a*b").matches("a" * 800)
    assert time.perf_counter() - began < 0.5
    assert not Glob("*a?a*a??*b").matches("a" * 65_536)
    assert Glob("*a*a*a*b").matches("a" * 65_536 + "b")
    assert time.perf_counter() - began < 0.5
