"""Load-time checks of ``when:`` conditions (issue 25): every mistake the library lets us find,
at ``file:line:col``, all of them in one load (``check``): names, functions, types found by the
probe, the cost bound (nesting, comprehensions), per-section variables."""

from __future__ import annotations

from pathlib import Path

from gateway.policy.condition_checks import (
    MAX_COMPREHENSION_NESTING,
    MAX_COMPREHENSIONS,
    MAX_NESTING,
    compile_condition,
)
from tests.support.policy import HEAD, policy_from, policy_problems


def refused(source: str, section: str = "tools") -> str:
    condition, reason = compile_condition(source, "f:1:1", section)
    assert condition is None, source
    assert reason is not None
    return reason


def accepted(source: str, section: str = "tools") -> None:
    condition, reason = compile_condition(source, "f:1:1", section)
    assert reason is None and condition is not None, (source, reason)


def test_every_broken_condition_of_a_file_is_listed_at_its_position(tmp_path: Path) -> None:
    found = policy_problems(
        tmp_path,
        "tools:\n"
        "  a:\n"
        "    scopes: []\n"
        "    when:\n"
        "      - 'subject + 1 == 2'\n"
        "      - 'claims.tid == \"t\"'\n"
        "      - 'lower(subject) == \"x\"'\n"
        "  b: {scopes: [], when: 'now > 5'}\n"
        "prompts:\n"
        "  p: {scopes: [], when: 'tool == \"x\"'}\n"
        "resources:\n"
        "  'file:///r': {scopes: [], when: 'arguments.size() == 0'}\n",
    )
    assert found == [
        "7:9: tools.a.when[0]: type error: an operator is applied to operands of the wrong types",
        "9:9: tools.a.when[2]: unknown function lower (docs/policy.md#conditions)",
        "10:19: tools.b.when: type error: an operator is applied to operands of the wrong types",
        "12:19: prompts.p.when: unknown variable tool (prompts conditions may read: claims, "
        "subject, client_id, scopes, issuer, auth_method, prompt, arguments, backend, "
        "request, now)",
        "14:29: resources.file:///r.when: unknown variable arguments (resources conditions may "
        "read: claims, subject, client_id, scopes, issuer, auth_method, resource, backend, "
        "request, now)",
    ], found


def test_type_errors_the_probe_finds_and_what_it_leaves_to_run_time() -> None:
    for wrong in (
        "subject + 1 == 2",
        "now > 5",
        "scopes.size() > '3'",
        "client_id.startsWith(1)",
        "has(claims.x) || issuer - 1 == 0",  # the probe reaches it past has()
        "request.ip > 1",
    ):
        assert refused(wrong).startswith("type error: "), wrong
    assert refused("subject") == "evaluates to str, not a bool"
    assert refused("scopes.size()") == "evaluates to int, not a bool"
    # Past a claim the probe does not have, types are decided at run time (where an error
    # denies and is counted): the library has no type checker to say more.
    accepted("claims.tid + 1 == 2")
    accepted("int(subject) == 3")  # a value error for the probe's empty subject, not a type one
    accepted("type(subject) == string && duration('1h') < duration('2h')")
    accepted("now.getDayOfWeek() >= 1 && now.getHours() < 18")
    accepted("subject.glob('*@example.com') && tool.glob('admin_*')")
    accepted("claims.groups.exists(g, g.startsWith('sre-'))")


def test_names_are_checked_per_section() -> None:
    accepted("prompt == 'p' && arguments.topic == 'x'", "prompts")
    accepted("resource.startsWith('file:///docs/') && backend == 'docs'", "resources")
    assert refused("prompt == 'p'").startswith("unknown variable prompt (tools conditions")
    assert refused("claimz.x == 1").startswith("unknown variable claimz")
    assert refused("optional.of(1) == 1").startswith("unknown")


def test_the_cost_bound_holds_at_and_just_past_each_limit() -> None:
    deep = MAX_NESTING - 1  # the == 1 comparison's brackets do not count; one pair is the list
    accepted("[" + "(" * deep + "1" + ")" * deep + "] == [1]")
    past = MAX_NESTING
    assert refused("[" + "(" * past + "1" + ")" * past + "] == [1]") == (
        f"nested deeper than {MAX_NESTING} brackets"
    )
    nested = "[1, 2].exists(x, [2, 3].exists(y, x == y))"
    assert MAX_COMPREHENSION_NESTING == 2
    accepted(nested)
    three = "[1].exists(x, [2].exists(y, [3].exists(z, x == y && y == z)))"
    assert refused(three).startswith("comprehensions nested 3 deep (at most 2)")
    many = " && ".join(f"[{i}].exists(x, x == 1)" for i in range(MAX_COMPREHENSIONS))
    accepted(many)
    more = many + " && [7].all(x, x == 1)"
    assert refused(more) == f"{MAX_COMPREHENSIONS + 1} comprehensions (at most 6)"
    # Brackets and macro names inside string literals are text, not structure.
    accepted("subject == '((((((((((((((((((((((((((.exists(' && subject != \"]]]\"")


def test_a_syntax_error_keeps_the_parsers_message_without_repeating_the_expression(
    tmp_path: Path,
) -> None:
    reason = refused("claims.tid ==")
    assert reason.startswith("CEL: ERROR: <input>:1:14: Syntax error: mismatched input")
    assert "Failed to parse expression" not in reason
    policy_from(HEAD + "tools:\n  a: {scopes: [], when: 'true'}\n", tmp_path)  # the baseline
