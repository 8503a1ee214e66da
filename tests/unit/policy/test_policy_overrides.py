"""``override:`` on tools rules: parsing, load errors with positions, renames, version, explain."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.policy.explain import explain
from gateway.policy.policy_loader import load_policy
from gateway.policy.warnings import unmatched_rules, unruled_tools
from tests.support.policy import policy_from, who, write_text

HEAD = "version: 1\nbaseline_scopes: [mcp:access]\n"

FULL = """
version: 1
baseline_scopes: [mcp:access]
tools:
  docs__search:
    scopes: [docs:read]
    rate_limit: 5/minute
    description: a note for people, never shown
    override:
      title: Find documents
      description: Searches the handbook.
      annotations: {readOnlyHint: false, title: Finder}
      rename: find_docs
      arguments:
        fixed: {tenant: acme, options: {deep: true}}
        hidden: [debug]
  "crm__*":
    scopes: []
    override: {annotations: {destructiveHint: true}}
"""


def problems_of(tmp_path: Path, body: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_policy([write_text(tmp_path / "p.yaml", HEAD + body)])
    return caught.value.problems


def test_a_full_override_is_parsed(tmp_path: Path) -> None:
    policy = policy_from(FULL, tmp_path)
    override = policy.override_for("docs__search")
    assert override is not None
    assert override.where.endswith("p.yaml:8:5") or override.where.endswith("policy.yaml:8:5")
    assert override.title == "Find documents"
    assert override.description == "Searches the handbook."
    assert dict(override.annotations) == {"readOnlyHint": False, "title": "Finder"}
    assert override.rename == "find_docs"
    assert dict(override.fixed) == {"tenant": "acme", "options": {"deep": True}}
    assert override.hidden == ("debug",)
    assert override.closed == {"tenant", "options", "debug"}
    # The rule's own description stays the people's note.
    assert policy.exact["docs__search"].description == "a note for people, never shown"


def test_a_pattern_override_applies_to_the_tools_it_governs(tmp_path: Path) -> None:
    policy = policy_from(FULL, tmp_path)
    found = policy.override_for("crm__delete")
    assert found is not None and dict(found.annotations) == {"destructiveHint": True}
    assert policy.override_for("other") is None


def test_the_renaming_rule_governs_the_new_name(tmp_path: Path) -> None:
    policy = policy_from(FULL, tmp_path)
    denied = policy.decide_tool(who("mcp:access"), "find_docs")
    allowed = policy.decide_tool(who("mcp:access docs:read"), "find_docs")
    assert denied.visible and not denied.allowed and denied.rule == "docs__search"
    assert allowed.allowed and allowed.rule == "docs__search"
    assert policy.rate_limit("find_docs") == (5, 60.0)
    # The new name is what an override makes, never a key for another override.
    assert policy.override_for("find_docs") is None
    assert unmatched_rules(policy, ["find_docs", "crm__x"]) == []
    assert unruled_tools(policy, ["find_docs"]) == []


def test_an_override_change_is_a_new_policy_version(tmp_path: Path) -> None:
    first = policy_from(FULL, tmp_path / "a")
    second = policy_from(FULL.replace("tenant: acme", "tenant: globex"), tmp_path / "b")
    same = policy_from(FULL.replace("title: Find documents", "title: 'Find documents'"), tmp_path)
    assert first.version != second.version
    assert first.version == same.version


def test_a_policy_without_overrides_keeps_its_version(tmp_path: Path) -> None:
    # The override member enters the hash only when present: existing policies keep theirs.
    body = "tools:\n  echo: {scopes: []}\n"
    policy = policy_from(HEAD + body, tmp_path)
    assert policy.aliases == {}
    assert policy.override_for("echo") is None


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "tools:\n  'a_*': {scopes: [], override: {rename: b}}\n",
            "4:34: tools.a_*.override.rename: rename needs an exact tool name, not a pattern",
        ),
        (
            "tools:\n  a: {scopes: [], override: {rename: a}}\n",
            "4:30: tools.a.override.rename: renames the tool to the name it already has",
        ),
        (
            "tools:\n  a: {scopes: [], override: {rename: 'b/c'}}\n",
            '4:30: tools.a.override.rename: "b/c" is not a tool name',
        ),
        (
            "tools:\n  a: {scopes: [], override: {}}\n",
            "4:19: tools.a.override: has fewer than 1 keys",
        ),
        (
            'tools:\n  a: {scopes: [], override: {title: "x\\u202ey"}}\n',
            '4:30: tools.a.override.title: "x\u202ey" must be 1-2048 characters without',
        ),
        (
            "tools:\n  a: {scopes: [], override: {arguments: {fixed: {t: 1}, hidden: [t]}}}\n",
            "4:66: tools.a.override.arguments.hidden[0]: 't' is also fixed",
        ),
        (
            "tools:\n  a: {scopes: [], override: {arguments: {fixed: {t: .inf}}}}\n",
            "4:50: tools.a.override.arguments.fixed.t: must be a plain JSON value",
        ),
        (
            "tools:\n  a: {scopes: [], override: {annotations: {readOnlyHint: 'no'}}}\n",
            "4:44: tools.a.override.annotations.readOnlyHint:",
        ),
        (
            "tools:\n  a: {scopes: [], override: {annotations: {secretHint: true}}}\n",
            "tools.a.override.annotations.secretHint: unknown key",
        ),
        (
            "prompts:\n  p: {scopes: [], override: {title: x}}\n",
            "4:19: prompts.p.override: overrides are supported on tools rules only",
        ),
        (
            "tools:\n  a: {scopes: [], override: {rename: c}}\n"
            "  b: {scopes: [], override: {rename: c}}\n",
            "5:19: tools.b.override.rename: tools.a at ",
        ),
        (
            "tools:\n  a: {scopes: [], override: {rename: b}}\n  b: {scopes: []}\n",
            "4:19: tools.a.override.rename: 'b' is the key of another rule (tools.b at ",
        ),
    ],
)
def test_load_errors(tmp_path: Path, body: str, expected: str) -> None:
    problems = problems_of(tmp_path, body)
    assert any(expected in problem for problem in problems), problems
    assert all(":" in problem.split(": ")[0] for problem in problems)


def test_explain_shows_the_override_both_ways(tmp_path: Path) -> None:
    policy = policy_from(FULL, tmp_path)
    by_new = explain(policy, who("mcp:access docs:read"), tool="find_docs")["results"][0]
    assert by_new["rule"] == "docs__search" and by_new["renamed_from"] == "docs__search"
    assert by_new["override"]["fixed"] == {"tenant": "acme", "options": {"deep": True}}
    by_old = explain(policy, who(), catalog=["docs__search", "crm__x"])["results"]
    assert by_old[1]["exposed_as"] == "find_docs"
    assert by_old[0]["override"]["annotations"] == {"destructiveHint": True}
    rules = explain(policy, who())["results"]
    assert [r.get("exposed_as") for r in rules] == ["find_docs", None]
    assert "override" in rules[1]


def test_the_example_of_docs_policy_md_loads(tmp_path: Path) -> None:
    """The Overrides chapter's example is a valid policy (the docs say what the code does)."""
    text = (Path(__file__).resolve().parents[3] / "docs" / "policy.md").read_text()
    chapter = text.split("## Overrides", 1)[1]
    example = chapter.split("```yaml\n", 1)[1].split("```", 1)[0]
    policy = policy_from(HEAD + example, tmp_path)
    override = policy.override_for("docs__search")
    assert override is not None and override.rename == "handbook_search"
    assert dict(override.fixed) == {"tenant": "acme", "max_results": 10}
    assert policy.decide_tool(who("mcp:access docs:read"), "handbook_search").allowed
    pattern = policy.override_for("crm__delete")
    assert pattern is not None and dict(pattern.annotations) == {"destructiveHint": True}
