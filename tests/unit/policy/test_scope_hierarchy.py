"""``scope_hierarchy:``: loading (schema, cycles, merging, every finding at file:line:col),
the version hash, evaluation (implied scopes satisfy, challenges stay least-privilege) and
``policy explain``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.policy.explain import explain
from gateway.policy.explain_text import print_text
from gateway.policy.hierarchy import ScopeHierarchy, find_cycle, find_cycles
from gateway.policy.policy_loader import load_policy
from tests.support.policy import HEAD, policy_from, policy_problems, who, write_text

RULES = "tools:\n  read: {scopes: [tickets:read]}\n  write: {scopes: [tickets:write]}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "scope_hierarchy:\n  a: [b]\n  b: [c]\n  c: [a]\n" + RULES,
            "4:3: scope_hierarchy.a: is part of a cycle (a -> b -> c -> a); a scope hierarchy "
            "must not lead back to a scope",
            id="three-cycle",
        ),
        pytest.param(
            "scope_hierarchy:\n  x: [y]\n  admin: [admin]\n" + RULES,
            "5:3: scope_hierarchy.admin: is part of a cycle (admin -> admin); a scope "
            "hierarchy must not lead back to a scope",
            id="self",
        ),
        pytest.param(
            "scope_hierarchy:\n  admin: []\n" + RULES,
            "4:3: scope_hierarchy.admin: is an empty list",
            id="empty-list",
        ),
        pytest.param(
            'scope_hierarchy:\n  "bad scope": [x]\n' + RULES,
            '4:3: scope_hierarchy.bad scope: "bad scope" is not a valid scope token '
            "(printable ASCII without spaces, quotes or backslashes; RFC 6749 §3.3)",
            id="bad-key",
        ),
        pytest.param(
            'scope_hierarchy:\n  admin: ["a b"]\n' + RULES,
            '4:11: scope_hierarchy.admin[0]: "a b" is not a valid scope token (printable ASCII '
            "without spaces, quotes or backslashes; RFC 6749 §3.3)",
            id="bad-value",
        ),
    ],
)
def test_each_mistake_is_reported_at_its_position(tmp_path: Path, text: str, expected: str) -> None:
    assert policy_problems(tmp_path, text) == [expected]


def test_a_scope_defined_in_two_files_is_reported_at_the_later_one(tmp_path: Path) -> None:
    first = write_text(tmp_path / "a.yaml", HEAD + "scope_hierarchy:\n  admin: [x]\n" + RULES)
    second = write_text(tmp_path / "b.yaml", "version: 1\nscope_hierarchy:\n  admin: [y]\n")
    with pytest.raises(ConfigError) as caught:
        load_policy([tmp_path])
    assert caught.value.problems == [
        f"{second}:3:3: scope_hierarchy.admin: also defined at {first}:4:3"
    ]


def test_a_cycle_across_files_is_an_error(tmp_path: Path) -> None:
    write_text(tmp_path / "a.yaml", HEAD + "scope_hierarchy:\n  a: [b]\n" + RULES)
    second = write_text(tmp_path / "b.yaml", "version: 1\nscope_hierarchy:\n  b: [a]\n")
    with pytest.raises(ConfigError) as caught:
        load_policy([tmp_path])
    (problem,) = caught.value.problems
    assert "a -> b -> a" in problem and problem.startswith(str(tmp_path / "a.yaml") + ":4:3:")
    assert second.exists()


def test_the_version_ignores_the_order_of_implied_scopes_and_changes_with_meaning(
    tmp_path: Path,
) -> None:
    plain = policy_from(HEAD + RULES, tmp_path / "0")
    one = policy_from(HEAD + "scope_hierarchy:\n  admin: [x, y]\n" + RULES, tmp_path / "1")
    same = policy_from(HEAD + "scope_hierarchy: {admin: [y, x]}\n" + RULES, tmp_path / "2")
    other = policy_from(HEAD + "scope_hierarchy:\n  admin: [x]\n" + RULES, tmp_path / "3")
    empty = policy_from(HEAD + "scope_hierarchy: {}\n" + RULES, tmp_path / "4")
    assert one.version == same.version
    assert len({plain.version, one.version, other.version}) == 3
    assert empty.version == plain.version  # an empty hierarchy means nothing


def test_hierarchy_names_are_known_scopes(tmp_path: Path) -> None:
    policy = policy_from(HEAD + "scope_hierarchy:\n  admin: [docs:read]\n" + RULES, tmp_path)
    assert {"admin", "docs:read", "tickets:read", "mcp:access"} <= policy.known_scopes


POLICY = (
    HEAD
    + "scope_hierarchy:\n  admin: [tickets:write]\n  tickets:write: [tickets:read]\n"
    + "methods:\n  tools/list: {scopes: [tickets:read]}\n"
    + RULES
    + "prompts:\n  brief: {scopes: [tickets:read]}\n"
    + "resources:\n  'file:///t/*': {scopes: [tickets:read]}\n"
)


def test_an_implied_scope_satisfies_rules_of_every_section_and_methods(tmp_path: Path) -> None:
    policy = policy_from(POLICY, tmp_path)
    admin = who("mcp:access admin")
    for decision in (
        policy.decide_tool(admin, "read"),
        policy.decide_tool(admin, "write"),
        policy.decide_prompt(admin, "brief"),
        policy.decide_resource(admin, "file:///t/a"),
        policy.decide_method(admin, "tools/list"),
    ):
        assert decision.allowed, decision
    assert policy.decide_tool(admin, "read").granted_scopes == ("mcp:access", "admin")
    assert policy.decide_tool(
        who("mcp:access tickets:read tickets:write"), "read"
    ).granted_scopes == (
        "mcp:access",
        "tickets:read",
    )  # a scope held directly is named, not the wider one


def test_the_challenge_names_the_least_privilege_scope(tmp_path: Path) -> None:
    policy = policy_from(POLICY, tmp_path)
    decision = policy.decide_tool(who("mcp:access tickets:read"), "write")
    assert not decision.allowed and decision.visible
    assert decision.required_scopes == ("mcp:access", "tickets:write")
    assert decision.missing_scopes == ("tickets:write",)
    assert decision.granted_scopes == ("mcp:access",)
    method = policy.decide_method(who("mcp:access"), "tools/list")
    assert method.missing_scopes == ("tickets:read",)


def test_the_closure_is_transitive_and_expansions_are_bounded() -> None:
    hierarchy = ScopeHierarchy({"a": ("b",), "b": ("c", "d"), "x": ("c",)})
    assert hierarchy.implied("a") == {"b", "c", "d"}
    assert hierarchy.expand(frozenset({"a"})) == {"a", "b", "c", "d"}
    assert hierarchy.held("c", frozenset({"x", "a"})) == "a"  # the first by name
    assert hierarchy.held("z", frozenset({"a"})) is None
    for index in range(2000):
        hierarchy.expand(frozenset({f"s{index}"}))
    assert len(hierarchy._expanded) <= 1024


def test_find_cycle() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"]}) is None
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["b"]}) == ["b", "c", "b"]
    # A long chain is walked without hitting the recursion limit at the schema's bound.
    chain = {f"s{i}": [f"s{i + 1}"] for i in range(256)}
    assert find_cycle(chain) is None


def test_find_cycles_gives_one_per_group_of_scopes_leading_to_each_other() -> None:
    declared = {"a": ["b"], "b": ["a", "c"], "c": ["d"], "d": ["c"], "x": ["x"], "y": ["a"]}
    assert find_cycles(declared) == [["a", "b", "a"], ["c", "d", "c"], ["x", "x"]]
    assert find_cycles({f"s{i}": [f"s{i + 1}"] for i in range(256)}) == []


def test_explain_prints_the_hierarchy_and_what_it_adds(tmp_path: Path) -> None:
    policy = policy_from(POLICY, tmp_path)
    report = explain(policy, who("mcp:access admin"), tool="read")
    assert report["scope_hierarchy"] == {
        "admin": ["tickets:write"],
        "tickets:write": ["tickets:read"],
    }
    assert report["implied_scopes"] == ["tickets:read", "tickets:write"]
    assert report["results"][0]["allowed"] is True
    out = io.StringIO()
    print_text(report, out)
    assert "implied by scope_hierarchy: tickets:read tickets:write\n" in out.getvalue()
    json.dumps(report)
    plain = explain(policy_from(HEAD + RULES, tmp_path / "plain"), who("mcp:access"))
    assert "scope_hierarchy" not in plain and "implied_scopes" not in plain
