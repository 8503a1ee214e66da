"""``when:`` conditions (CEL, issue 25): compiled and checked at load, evaluated fail-closed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import ConfigError
from gateway.policy.conditions import MAX_EXPRESSION_LENGTH
from gateway.policy.loader import load_policy
from gateway.seams import Principal, frozen_claims
from tests.support.policy import policy_from, who, write_text

HEAD = "version: 1\nbaseline_scopes: [mcp:access]\n"


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = write_text(tmp_path / "p.yaml", HEAD + text)
    with pytest.raises(ConfigError) as caught:
        load_policy([path])
    return [problem.removeprefix(f"{path}:") for problem in caught.value.problems]


def caller(claims: dict[str, Any], scopes: str = "mcp:access") -> Principal:
    return dataclasses.replace(who(scopes), claims=frozen_claims(claims))


def test_syntax_errors_and_unknown_variables_are_reported_at_the_expression(
    tmp_path: Path,
) -> None:
    found = problems_of(
        tmp_path,
        "tools:\n"
        "  a:\n"
        "    scopes: []\n"
        "    when: 'claims.tid =='\n"
        "  b:\n"
        "    scopes: []\n"
        "    when:\n"
        "      - 'subject == \"x\"'\n"
        "      - 'request.ip == \"1\"'\n",
    )
    assert len(found) == 2, found
    assert found[0].startswith("6:5: tools.a.when: CEL: ") and "Syntax error" in found[0]
    assert found[1].startswith("11:9: tools.b.when[1]: unknown variable request"), found[1]


def test_the_length_cap_holds_at_and_just_past_the_limit(tmp_path: Path) -> None:
    at = "subject == '" + "x" * (MAX_EXPRESSION_LENGTH - 13) + "'"
    assert len(at) == MAX_EXPRESSION_LENGTH
    policy_from(HEAD + f'tools:\n  a: {{scopes: [], when: "{at}"}}\n', tmp_path)
    past = at[:-1] + "x'"
    found = problems_of(tmp_path, f'tools:\n  a: {{scopes: [], when: "{past}"}}\n')
    assert found == [f"4:19: tools.a.when: longer than {MAX_EXPRESSION_LENGTH} characters"]


def test_conditions_on_prompts_and_resources_are_refused_not_ignored(tmp_path: Path) -> None:
    found = problems_of(tmp_path, "prompts:\n  p: {scopes: [], when: 'true'}\n")
    assert found == [
        "4:19: prompts.p.when: conditions are supported on tools rules only (not yet here)"
    ]


def test_macro_variables_are_not_unknown_and_conditions_change_the_version(
    tmp_path: Path,
) -> None:
    plain = policy_from(HEAD + "tools:\n  a: {scopes: []}\n", tmp_path)
    text = "tools:\n  a: {scopes: [], when: 'claims.groups.exists(g, g == \"sre\")'}\n"
    ruled = policy_from(HEAD + text, tmp_path)
    assert plain.version != ruled.version


def test_evaluation_all_must_hold_and_errors_deny(tmp_path: Path) -> None:
    policy = policy_from(
        HEAD + "tools:\n"
        "  restart:\n"
        "    scopes: []\n"
        "    when:\n"
        "      - '\"sre\" in claims.groups'\n"
        '      - \'arguments.env != "prod" || claims.tid == "t1"\'\n'
        "  odd: {scopes: [], when: 'claims.tid'}\n",
        tmp_path,
    )
    sre = caller({"groups": ["sre"], "tid": "t1"})
    assert policy.decide_tool(sre, "restart").allowed
    assert policy.decide_conditions(sre, "restart", {"env": "prod"}) is None
    other_tenant = caller({"groups": ["sre"], "tid": "t2"})
    refused = policy.decide_conditions(other_tenant, "restart", {"env": "prod"})
    assert refused is not None and refused.reason == "condition" and refused.rule == "restart"
    assert refused.visible and not refused.allowed and refused.missing_scopes == ()
    assert policy.decide_conditions(other_tenant, "restart", {"env": "dev"}) is None
    # No groups claim: a missing key without has() is an error, and it denies.
    broken = policy.decide_conditions(caller({"tid": "t1"}), "restart", {"env": "dev"})
    assert broken is not None and broken.reason == "condition_error"
    assert broken.detail.startswith(f"{tmp_path / 'policy.yaml'}:7:9: KeyError")
    # A non-boolean result denies too.
    odd = policy.decide_conditions(sre, "odd", {})
    assert odd is not None and odd.reason == "condition_error" and "not a bool" in odd.detail
    # A rule without conditions, and an unknown tool, have nothing to refuse here.
    assert policy.decide_conditions(sre, "nope", {}) is None
