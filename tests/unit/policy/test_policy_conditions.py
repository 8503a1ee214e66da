"""``when:`` conditions (CEL, issue 25): compiled and checked at load, evaluated fail-closed."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gateway.policy import conditions
from gateway.policy.condition_checks import MAX_EXPRESSION_LENGTH
from gateway.policy.policy_loader import load_policy
from gateway.seams import AccessQuestion, Principal, frozen_claims
from tests.support.policy import HEAD, ISSUER, policy_from, policy_problems, who, write_text


def caller(claims: dict[str, Any], scopes: str = "mcp:access") -> Principal:
    return dataclasses.replace(who(scopes), claims=frozen_claims(claims))


def kept(contexts: conditions.TokenContexts, principal: Principal) -> object:
    """The context ``contexts`` keeps for ``principal`` (the test fails if it has none)."""

    def derive(_: Principal) -> conditions.TokenContext | str:
        raise AssertionError("no context kept for this principal")

    return contexts.of(principal, derive)


def test_syntax_errors_and_unknown_variables_are_reported_at_the_expression(
    tmp_path: Path,
) -> None:
    found = policy_problems(
        tmp_path,
        "tools:\n"
        "  a:\n"
        "    scopes: []\n"
        "    when: 'claims.tid =='\n"
        "  b:\n"
        "    scopes: []\n"
        "    when:\n"
        "      - 'subject == \"x\"'\n"
        "      - 'tenant.ip == \"1\"'\n",
    )
    assert len(found) == 2, found
    assert found[0].startswith("6:5: tools.a.when: CEL: ") and "Syntax error" in found[0]
    assert found[1].startswith("11:9: tools.b.when[1]: unknown variable tenant"), found[1]


def test_the_length_cap_holds_at_and_just_past_the_limit(tmp_path: Path) -> None:
    at = "subject == '" + "x" * (MAX_EXPRESSION_LENGTH - 13) + "'"
    assert len(at) == MAX_EXPRESSION_LENGTH
    policy_from(HEAD + f'tools:\n  a: {{scopes: [], when: "{at}"}}\n', tmp_path)
    past = at[:-1] + "x'"
    found = policy_problems(tmp_path, f'tools:\n  a: {{scopes: [], when: "{past}"}}\n')
    assert found == [f"4:19: tools.a.when: longer than {MAX_EXPRESSION_LENGTH} characters"]


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
    assert (
        policy.decide_conditions(
            sre, AccessQuestion("tools/call", "restart", None, {"env": "prod"})
        )
        is None
    )
    other_tenant = caller({"groups": ["sre"], "tid": "t2"})
    refused = policy.decide_conditions(
        other_tenant, AccessQuestion("tools/call", "restart", None, {"env": "prod"})
    )
    assert refused is not None and refused.reason == "condition" and refused.rule == "restart"
    assert refused.visible and not refused.allowed and refused.missing_scopes == ()
    assert (
        policy.decide_conditions(
            other_tenant, AccessQuestion("tools/call", "restart", None, {"env": "dev"})
        )
        is None
    )
    # No groups claim: a missing key without has() is an error, and it denies.
    broken = policy.decide_conditions(
        caller({"tid": "t1"}), AccessQuestion("tools/call", "restart", None, {"env": "dev"})
    )
    assert broken is not None and broken.reason == "condition_error"
    assert broken.detail == f"{tmp_path / 'policy.yaml'}:7:9: no such key 'groups' (use has())"
    # A non-boolean result denies too.
    odd = policy.decide_conditions(sre, AccessQuestion("tools/call", "odd", None, {}))
    assert odd is not None and odd.reason == "condition_error" and "not a bool" in odd.detail
    # A rule without conditions, and an unknown tool, have nothing to refuse here.
    assert policy.decide_conditions(sre, AccessQuestion("tools/call", "nope", None, {})) is None


def test_the_token_facts_are_converted_once_per_principal(tmp_path: Path) -> None:
    policy = policy_from(
        HEAD + "tools:\n  t:\n    scopes: []\n    when:\n"
        '      - \'"sre" in claims.groups && auth_method == "introspection"\'\n'
        "      - 'arguments.n < 3'\n",
        tmp_path,
    )
    sre = caller({"groups": ["sre"]})
    contexts = policy.token_contexts
    assert policy.decide_conditions(sre, AccessQuestion("tools/call", "t", None, {"n": 1})) is None
    built = kept(contexts, sre)
    assert isinstance(built, conditions.TokenContext)
    refused = policy.decide_conditions(sre, AccessQuestion("tools/call", "t", None, {"n": 5}))
    assert refused is not None and refused.reason == "condition"
    assert kept(contexts, sre) is built  # the same context: per-call values do not stick
    assert built.call == {}
    assert policy.decide_conditions(sre, AccessQuestion("tools/call", "t", None, {"n": 2})) is None
    # A copy with other facts (as DPoP's +dpop method) gets a context of its own.
    other = dataclasses.replace(sre, auth_method="jwt")
    assert other not in contexts
    assert (
        policy.decide_conditions(other, AccessQuestion("tools/call", "t", None, {"n": 1}))
        is not None
    )
    assert len(contexts) == 2


def test_run_time_reasons_name_the_expression_never_a_value(tmp_path: Path) -> None:
    policy = policy_from(
        HEAD + "tools:\n"
        "  a: {scopes: [], when: 'claims[claims.pick] == 1'}\n"
        "  b: {scopes: [], when: 'int(claims.code) == 1'}\n"
        "  c: {scopes: [], when: 'claims.code + 1 == 2'}\n",
        tmp_path,
    )
    secret = caller({"pick": "s3cr3t-value", "code": "s3cr3t-code"})
    details = [
        policy.decide_conditions(secret, AccessQuestion("tools/call", name, None, {}))
        for name in "abc"
    ]
    assert [d.reason if d else None for d in details] == ["condition_error"] * 3
    where = str(tmp_path / "policy.yaml")
    assert [d.detail for d in details if d] == [
        f"{where}:4:19: no such key (use has())",
        f"{where}:5:19: function int failed",
        f"{where}:6:19: wrong types: string + int",
    ]
    # A claim value the library could not convert (JSON never gives one; defence) denies.
    huge = caller({"n": object(), "groups": ["sre"]})
    odd = policy_from(HEAD + "tools:\n  t: {scopes: [], when: 'true'}\n", tmp_path, "o.yaml")
    found = odd.decide_conditions(huge, AccessQuestion("tools/call", "t", None, {}))
    assert found is not None and found.reason == "condition_error"
    assert "token claims are not CEL values" in found.detail


def test_a_listing_decides_only_what_does_not_read_the_arguments(tmp_path: Path) -> None:
    policy = policy_from(
        HEAD + "tools:\n  t:\n    scopes: []\n    when:\n"
        "      - 'claims.tid == \"t1\"'\n"
        "      - 'arguments.env != \"prod\"'\n"
        "  args_only: {scopes: [], when: 'arguments.env != \"prod\"'}\n",
        tmp_path,
    )
    mine, theirs = caller({"tid": "t1"}), caller({"tid": "t2"})
    assert policy.decide_conditions(mine, AccessQuestion("tools/call", "t")) is None
    refused = policy.decide_conditions(theirs, AccessQuestion("tools/call", "t"))
    assert refused is not None and refused.reason == "condition"
    assert (
        policy.decide_conditions(theirs, AccessQuestion("tools/call", "args_only")) is None
    )  # decided at the call
    assert (
        policy.decide_conditions(mine, AccessQuestion("tools/call", "t", None, {"env": "prod"}))
        is not None
    )


def test_glob_now_request_and_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = policy_from(
        HEAD + "tools:\n"
        '  g: {scopes: [], when: \'subject.glob("al*") && !glob(subject, "bob?")\'}\n'
        "  classes: {scopes: [], when: 'subject.glob(claims.pattern)'}\n"
        "  hours:\n"
        "    scopes: []\n"
        "    when: 'now.getDayOfWeek() >= 1 && now.getDayOfWeek() <= 5 && now.getHours() >= 8"
        " && now.getHours() < 18'\n"
        '  net: {scopes: [], when: \'request.ip.startsWith("10.") && backend == "ops"\'}\n',
        tmp_path,
    )
    alice = caller({"pattern": "[a]*"})
    assert policy.decide_conditions(alice, AccessQuestion("tools/call", "g", None, {})) is None
    wrong = policy.decide_conditions(alice, AccessQuestion("tools/call", "classes", None, {}))
    assert wrong is not None and wrong.reason == "condition_error"
    monkeypatch.setattr(conditions, "wall_clock", lambda: 1796378400.0)  # Fri 2026-12-04 10:00Z
    assert policy.decide_conditions(alice, AccessQuestion("tools/call", "hours", None, {})) is None
    monkeypatch.setattr(conditions, "wall_clock", lambda: 1796594400.0)  # Sun 2026-12-06 22:00Z
    late = policy.decide_conditions(alice, AccessQuestion("tools/call", "hours", None, {}))
    assert late is not None and late.reason == "condition"
    assert (
        policy.decide_conditions(alice, AccessQuestion("tools/call", "net", "ops", {}), "10.1.2.3")
        is None
    )
    assert policy.decide_conditions(
        alice, AccessQuestion("tools/call", "net", "ops", {}), "192.0.2.1"
    )


def test_prompt_and_resource_rules_decide_their_own_names(tmp_path: Path) -> None:
    policy = policy_from(
        HEAD + "prompts:\n"
        "  'ops_*': {scopes: [], when: 'prompt != \"ops_secret\" && arguments.env != \"prod\"'}\n"
        "resources:\n"
        "  'file:///docs/*': {scopes: [], when: '!resource.endsWith(\".key\")'}\n",
        tmp_path,
    )
    who_ = caller({})
    assert (
        policy.decide_conditions(who_, AccessQuestion("prompts/get", "ops_a", None, {"env": "dev"}))
        is None
    )
    assert (
        policy.decide_conditions(who_, AccessQuestion("prompts/get", "ops_secret", None, {}))
        is not None
    )
    assert policy.decide_conditions(
        who_, AccessQuestion("prompts/get", "ops_a", None, {"env": "prod"})
    )
    assert policy.decide_conditions(who_, AccessQuestion("prompts/get", "ops_a")) is None
    read = "file:///docs/a.md"
    assert policy.decide_conditions(who_, AccessQuestion("resources/read", read, None, {})) is None
    assert policy.decide_conditions(
        who_, AccessQuestion("resources/read", "file:///docs/x.key", None, {})
    )


def test_a_question_without_arguments_decides_on_the_rule_s_own_conditions_when_none_read_any(
    tmp_path: Path,
) -> None:
    """Resources rules read no arguments, so a read asks its question without any (the one the
    decision point gets): it must find the rule's planned conditions, not plan a copy per call."""
    policy = policy_from(
        HEAD
        + "resources:\n  'file:///docs/*': {scopes: [], when: '!resource.endsWith(\".key\")'}\n",
        tmp_path,
    )
    question = AccessQuestion("resources/read", "file:///docs/a.md", "docs")
    conditions._plans.clear()
    assert policy.decide_conditions(caller({}), question) is None
    assert policy.decide_conditions(caller({}), question) is None
    (planned,) = conditions._plans.values()
    assert planned.conditions is policy.resources.lookup("file:///docs/a.md")[0].when


def test_only_the_most_recent_principals_keep_their_context(tmp_path: Path) -> None:
    contexts = conditions.TokenContexts(2)
    path = write_text(
        tmp_path / "policy.yaml", HEAD + "tools:\n  t: {scopes: [], when: 'claims.n > 1'}\n"
    )
    policy = load_policy([path], issuers=(ISSUER,), token_contexts=contexts)
    first, second, third = (caller({"n": n}) for n in (2, 3, 0))
    for principal in (first, second, first, third):
        policy.decide_conditions(principal, AccessQuestion("tools/call", "t", None, {}))
    # first was used again after second: second is the least recent and gave its context up.
    assert second not in contexts
    assert first in contexts and third in contexts
    assert (
        policy.decide_conditions(second, AccessQuestion("tools/call", "t", None, {})) is None
    )  # rebuilt, same answer
    assert first not in contexts  # now first was the least recent
    refused = policy.decide_conditions(third, AccessQuestion("tools/call", "t", None, {}))
    assert refused is not None and refused.reason == "condition"
