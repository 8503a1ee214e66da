"""The pure evaluator: precedence, any_of, clients, subjects, deny, methods, fail closed."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from gateway.policy.glob import Glob
from gateway.policy.policy_set import PolicySet
from gateway.policy.rules import LOOKUP_CACHE_SIZE, Rule
from gateway.policy.warnings import unmatched_rules, unreachable_rules, unruled_tools
from gateway.seams import Principal
from tests.support.policy import policy_from, who

POLICY = """
version: 1
baseline_scopes: [mcp:access]
methods:
  tools/list: {scopes: [catalog:read]}
tools:
  search_docs: {scopes: [docs:read]}
  "docs_*": {scopes: [docs:read]}
  "docs_admin_*": {scopes: [docs:admin]}
  docs_admin_purge: {deny: true}
  "report_??": {scopes: [reports:read]}
  "report_*": {scopes: [reports:admin]}
  create_ticket:
    scopes: [tickets:write]
    any_of: [[team:a], [team:b, team:c]]
  read_ticket: {any_of: [[tickets:read], [tickets:write]]}
  "admin_*": {scopes: [admin], clients: [ops-console]}
  "me_*": {scopes: [], subjects: [alice, "*@example.com"]}
  legacy_tool: {scopes: [docs:read], deny: true, rate_limit: 5/second}
  notes_add: {scopes: [notes:write], rate_limit: 30/minute, max_concurrency: 2}
"""


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> PolicySet:
    return policy_from(POLICY, tmp_path_factory.mktemp("evaluate"))


ALLOW, STEP_UP, HIDDEN = "allow", "step-up", "hidden"

# name: (tool, caller, "verdict rule reason | required scopes | missing scopes"); rule - is none
CASES: dict[str, tuple[str, Principal, str]] = {
    "exact rule, scopes present": (
        "search_docs",
        who("mcp:access docs:read"),
        "allow search_docs allow | mcp:access docs:read |",
    ),
    "exact rule, scope missing": (
        "search_docs",
        who("mcp:access"),
        "step-up search_docs scope | mcp:access docs:read | docs:read",
    ),
    "baseline missing is part of the step-up": (
        "search_docs",
        who("docs:read"),
        "step-up search_docs scope | mcp:access docs:read | mcp:access",
    ),
    "no scopes at all names every scope": (
        "search_docs",
        who(""),
        "step-up search_docs scope | mcp:access docs:read | mcp:access docs:read",
    ),
    "glob rule": (
        "docs_search",
        who("mcp:access docs:read"),
        "allow docs_* allow | mcp:access docs:read |",
    ),
    "more literal characters beat fewer": (
        "docs_admin_users",
        who("mcp:access docs:read"),
        "step-up docs_admin_* scope | mcp:access docs:admin | docs:admin",
    ),
    "exact deny beats a matching glob": (
        "docs_admin_purge",
        who("mcp:access docs:admin"),
        "hidden docs_admin_purge deny",
    ),
    "'?' beats '*' at equal literal count": (
        "report_q1",
        who("mcp:access reports:read"),
        "allow report_?? allow | mcp:access reports:read |",
    ),
    "'?' pins the length": (
        "report_2024",
        who("mcp:access reports:read"),
        "step-up report_* scope | mcp:access reports:admin | reports:admin",
    ),
    "any_of: a satisfied alternative allows": (
        "create_ticket",
        who("mcp:access tickets:write team:b team:c"),
        "allow create_ticket allow | mcp:access tickets:write team:b team:c |",
    ),
    "any_of: step-up picks the alternative with fewest missing": (
        "create_ticket",
        who("mcp:access team:b team:c"),
        "step-up create_ticket scope | mcp:access tickets:write team:b team:c | tickets:write",
    ),
    "any_of: equal missing counts pick the first alternative": (
        "create_ticket",
        who("mcp:access tickets:write team:b"),
        "step-up create_ticket scope | mcp:access tickets:write team:a | team:a",
    ),
    "any_of: scopes alone do not satisfy": (
        "create_ticket",
        who("mcp:access tickets:write"),
        "step-up create_ticket scope | mcp:access tickets:write team:a | team:a",
    ),
    "any_of without scopes: second alternative": (
        "read_ticket",
        who("mcp:access tickets:write"),
        "allow read_ticket allow | mcp:access tickets:write |",
    ),
    "any_of without scopes: step-up to the first": (
        "read_ticket",
        who("mcp:access"),
        "step-up read_ticket scope | mcp:access tickets:read | tickets:read",
    ),
    "allow-listed client": (
        "admin_reset",
        who("mcp:access admin", client_id="ops-console"),
        "allow admin_* allow | mcp:access admin |",
    ),
    "other client is hidden": (
        "admin_reset",
        who("mcp:access admin", client_id="cli"),
        "hidden admin_* client",
    ),
    "no client_id is hidden": (
        "admin_reset",
        who("mcp:access admin", client_id=None),
        "hidden admin_* client",
    ),
    "other client without the scope gets no step-up hint": (
        "admin_reset",
        who("mcp:access"),
        "hidden admin_* client",
    ),
    "allow-listed client without the scope steps up": (
        "admin_reset",
        who("mcp:access", client_id="ops-console"),
        "step-up admin_* scope | mcp:access admin | admin",
    ),
    "subject listed exactly": (
        "me_profile",
        who("mcp:access", sub="alice"),
        "allow me_* allow | mcp:access |",
    ),
    "subject matching a pattern": (
        "me_profile",
        who("mcp:access", sub="bob@example.com"),
        "allow me_* allow | mcp:access |",
    ),
    "subject patterns match the whole subject": (
        "me_profile",
        who("mcp:access", sub="bob@example.com.evil"),
        "hidden me_* subject",
    ),
    "unlisted subject is hidden": (
        "me_profile",
        who("mcp:access", sub="mallory"),
        "hidden me_* subject",
    ),
    "subject match is case-sensitive": (
        "me_profile",
        who("mcp:access", sub="Alice"),
        "hidden me_* subject",
    ),
    "deny wins over scopes": (
        "legacy_tool",
        who("mcp:access docs:read"),
        "hidden legacy_tool deny",
    ),
    "no rule is hidden": ("drop_database", who("mcp:access docs:read admin"), "hidden - no_rule"),
    "tool names are case-sensitive": (
        "Search_docs",
        who("mcp:access docs:read"),
        "hidden - no_rule",
    ),
    "a glob must match the whole name": (
        "my_docs_x",
        who("mcp:access docs:read"),
        "hidden - no_rule",
    ),
    "empty tool name": ("", who("mcp:access"), "hidden - no_rule"),
}


@pytest.mark.parametrize(
    ("tool", "caller", "expected"),
    [pytest.param(*case, id=name) for name, case in CASES.items()],
)
def test_a_tool_decision_follows_the_ladder(
    policy: PolicySet, tool: str, caller: Principal, expected: str
) -> None:
    ladder, required, missing = (*expected.split("|"), "", "")[:3]
    verdict, rule, reason = ladder.split()
    decision = policy.decide_tool(caller, tool)
    got = ALLOW if decision.allowed else STEP_UP if decision.visible else HIDDEN
    assert (got, decision.rule or "-", decision.reason) == (verdict, rule, reason)
    assert decision.required_scopes == tuple(required.split())
    assert decision.missing_scopes == tuple(missing.split())


class TestMethods:
    def test_tools_list_needs_its_extra_scopes_besides_the_baseline(
        self, policy: PolicySet
    ) -> None:
        decision = policy.decide_method(who("mcp:access"), "tools/list")
        assert not decision.allowed and decision.visible
        assert decision.rule == "tools/list"
        assert decision.required_scopes == ("mcp:access", "catalog:read")
        assert decision.missing_scopes == ("catalog:read",)

    def test_tools_list_is_allowed_with_baseline_and_extra_scopes(self, policy: PolicySet) -> None:
        decision = policy.decide_method(who("mcp:access catalog:read"), "tools/list")
        assert decision.allowed and decision.reason == "allow"

    def test_a_method_without_a_rule_needs_only_the_baseline(self, policy: PolicySet) -> None:
        assert policy.decide_method(who("mcp:access"), "server/discover").allowed
        decision = policy.decide_method(who("docs:read"), "ping")
        assert (decision.allowed, decision.rule, decision.missing_scopes) == (
            False,
            None,
            ("mcp:access",),
        )

    def test_server_discover_scopes_also_govern_legacy_initialize(self, tmp_path: Path) -> None:
        policy = policy_from(
            """
            version: 1
            baseline_scopes: [mcp:access]
            methods:
              server/discover: {scopes: [mcp:discover]}
            """,
            tmp_path,
        )
        for method in ("server/discover", "initialize"):
            decision = policy.decide_method(who("mcp:access"), method)
            assert decision.missing_scopes == ("mcp:discover",)
            assert decision.rule == "server/discover"
        assert policy.decide_method(who("mcp:access mcp:discover"), "initialize").allowed


class TestLimitsLookups:
    def test_rate_limit_and_concurrency_come_from_the_governing_rule(
        self, policy: PolicySet
    ) -> None:
        assert policy.rate_limit("notes_add") == (30, 60.0)
        assert policy.max_concurrency("notes_add") == 2

    @pytest.mark.parametrize(
        "tool", ["search_docs", "drop_database", "legacy_tool"], ids=["no limit", "no rule", "deny"]
    )
    def test_no_limit_without_a_rule_that_sets_one(self, policy: PolicySet, tool: str) -> None:
        assert policy.rate_limit(tool) is None
        assert policy.max_concurrency(tool) is None


class _ExplodingScopes:
    """Scopes whose every use raises: an evaluation error."""

    def __contains__(self, item: object) -> bool:
        raise RuntimeError("boom")

    def __iter__(self) -> Any:
        raise RuntimeError("boom")

    def __len__(self) -> int:
        raise RuntimeError("boom")


class TestFailClosed:
    def test_an_evaluation_error_denies_and_hides(self, policy: PolicySet) -> None:
        # Fault injection: a scope set that raises cannot come from the authenticator.
        broken = Principal("alice", "cli", _ExplodingScopes(), 0.0, "i", "fp")  # type: ignore[arg-type]
        decision = policy.decide_tool(broken, "search_docs")
        assert (decision.allowed, decision.visible, decision.reason) == (False, False, "error")
        method = policy.decide_method(broken, "tools/list")
        assert (method.allowed, method.reason) == (False, "error")

    def test_a_tie_between_patterns_denies_and_hides(self) -> None:
        # The loader rejects ties; a hand-built set proves the evaluator still fails closed.
        tied = [_glob_rule("a*", "x"), _glob_rule("*a", "y")]
        policy = PolicySet("v", ("mcp:access",), MappingProxyType({}), tuple(tied), {})
        decision = policy.decide_tool(who("mcp:access x y"), "aa")
        assert (decision.allowed, decision.visible, decision.reason) == (False, False, "tie")
        assert policy.rule_for("aa") is None
        assert policy.rate_limit("aa") is None
        # A name only one of them matches is unaffected.
        assert policy.decide_tool(who("mcp:access x"), "ab").allowed


def _glob_rule(key: str, scope: str, **extra: Any) -> Rule:
    return Rule(key=key, where="f:1:1", scopes=(scope,), glob=Glob(key), **extra)


class TestCatalogCrossChecks:
    def test_rules_governing_no_catalog_tool_are_warnings_with_their_position(
        self, tmp_path: Path
    ) -> None:
        policy = policy_from(
            """
            version: 1
            baseline_scopes: [mcp:access]
            tools:
              echo: {scopes: []}
              gone: {scopes: []}
              "notes_*": {scopes: [notes:read]}
              "no_match_*": {scopes: []}
              "*": {deny: true}
            """,
            tmp_path,
        )
        warnings = unmatched_rules(policy, ["echo", "notes_add", "notes_list"])
        file = tmp_path / "policy.yaml"
        assert warnings == [
            f"{file}:5:3: tools.gone: rule matches no tool in the backend catalog",
            f"{file}:7:3: tools.no_match_*: rule matches no tool in the backend catalog",
            f"{file}:8:3: tools.*: every tool this pattern matches is governed by a more "
            "specific rule",
        ]

    def test_rules_no_configured_backend_can_match_are_warnings_with_their_position(
        self, tmp_path: Path
    ) -> None:
        # Issue 32 item 6: wiki__search with no wiki backend was found only at runtime.
        policy = policy_from(
            f"""
            version: 1
            baseline_scopes: [mcp:access]
            tools:
              wiki__search: {{scopes: []}}
              docs__search: {{scopes: []}}
              "wiki__*": {{scopes: []}}
              "*__admin": {{scopes: []}}
              "d?cs*": {{scopes: []}}
              "tick*": {{scopes: []}}
              "dw.*": {{scopes: []}}
              "has space": {{scopes: []}}
              "docs__{"a" * 58}": {{scopes: []}}
              "docs__{"a" * 59}": {{scopes: []}}
              "docs__{"?" * 59}*": {{scopes: []}}
            prompts:
              wiki__summary: {{scopes: []}}
              "docs__*": {{scopes: []}}
            """,
            tmp_path,
        )
        file = tmp_path / "policy.yaml"
        never = "can never match: no configured backend advertises such a name"
        chars = "can never match: tool names are 1-64 characters of [A-Za-z0-9_.-]"
        shown = "(prefixes: 'docs__', 'tickets__')"
        assert unreachable_rules(policy, ["tickets__", "docs__"]) == [
            f"{file}:4:3: tools.wiki__search: {never} {shown}",
            f"{file}:6:3: tools.wiki__*: {never} {shown}",
            f"{file}:10:3: tools.dw.*: {never} {shown}",
            f"{file}:11:3: tools.has space: {chars}",
            f"{file}:13:3: tools.docs__{'a' * 59}: {chars}",
            f"{file}:14:3: tools.docs__{'?' * 59}*: {chars}",
            f"{file}:16:3: prompts.wiki__summary: {never} {shown}",
        ]
        # 64 characters is a name (line 12); an unprefixed backend (prefix "") may advertise any
        # name, so only the name syntax is left.
        assert unreachable_rules(policy, ["docs__", ""]) == [
            f"{file}:11:3: tools.has space: {chars}",
            f"{file}:13:3: tools.docs__{'a' * 59}: {chars}",
            f"{file}:14:3: tools.docs__{'?' * 59}*: {chars}",
        ]

    def test_catalog_tools_without_a_rule_are_listed_as_hidden(self, policy: PolicySet) -> None:
        assert unruled_tools(policy, ["search_docs", "zeta", "alpha", "docs_x", "zeta"]) == [
            "alpha",
            "zeta",
        ]


class TestLookupMemo:
    def test_the_lookup_memo_stays_bounded_and_decisions_stay_right(
        self, policy: PolicySet
    ) -> None:
        # The real bound, not a monkeypatched one.
        caller = who("mcp:access docs:read")
        names = LOOKUP_CACHE_SIZE + 10
        for round_ in range(2):
            for index in range(names):
                name = f"docs_{index}" if index % 2 else f"other_{index}"
                decision = policy.decide_tool(caller, name)
                assert decision.allowed is bool(index % 2), (round_, name)
                assert len(policy._lookups) <= LOOKUP_CACHE_SIZE
