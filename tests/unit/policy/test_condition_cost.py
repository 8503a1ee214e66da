"""The cost bound of ``when:`` conditions (issue 43 item 1): the library cannot be given a cost
limit nor interrupted, so ``check`` refuses an expression whose worst case over the largest
inputs exceeds the budget, and a call whose arguments are larger than those inputs is refused
before any condition runs. Also the parser the bound walks, checked against the library's."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import cel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.errors import ConfigError
from gateway.policy.cel_syntax import MACROS, CelSyntaxError, TooDeep, parse
from gateway.policy.condition_checks import compile_condition
from gateway.policy.condition_cost import BUDGET, TOKEN_BYTES
from gateway.policy.conditions import (
    MAX_ARGUMENT_CHARACTERS,
    MAX_ARGUMENT_VALUES,
    MAX_GLOB_PATTERN,
)
from gateway.policy.regex_cost import regex_cost
from gateway.seams import AccessQuestion, frozen_claims
from tests.support.policy import policy_from, who

HEAD = "version: 1\nbaseline_scopes: [mcp:access]\n"
CUBIC = "arguments.a.exists(x, arguments.a.exists(y, x in arguments.a))"
"""The red team's expression (issue 43 item 1): accepted before, 35 s on 5.7 KB."""


def reason_of(source: str, section: str = "tools") -> str | None:
    condition, reason = compile_condition(source, "f:1:1", section)
    assert (condition is None) == (reason is not None)
    return reason


def cost_ms(source: str, section: str = "tools") -> float:
    condition, reason = compile_condition(source, "f:1:1", section)
    assert condition is not None, reason
    return condition.cost / 1e6


def test_nested_comprehensions_over_arguments_or_claims_are_refused_with_their_cost() -> None:
    for source in (
        CUBIC,
        "arguments.a.exists(x, x in arguments.a)",  # arguments converted at every read
        "arguments.a.exists(x, arguments.b.exists(y, x == y))",
        "claims.a.exists(x, claims.b.exists(y, x == y))",  # a token is 16 KiB at most
        "arguments.a.exists(x, arguments.b.exists(y, glob(x, y)))",
        "arguments.a.map(x, arguments.a).exists(l, l.exists(y, y == 1))",
    ):
        reason = reason_of(source)
        assert reason is not None and reason.startswith("may cost up to "), (source, reason)
        assert reason.endswith(
            "ms with the largest inputs it can be given (a rule's conditions may cost 50 ms "
            "together: docs/policy.md#cost)"
        )
    # Small lists written in the expression are fine nested: their size is known.
    assert cost_ms("[1, 2].exists(x, ['a', 'b'].exists(y, string(x) == y))") < 1


def test_what_policies_write_costs_a_few_milliseconds_at_most() -> None:
    assert cost_ms('has(claims.groups) && "mcp-sre" in claims.groups') < 2
    assert cost_ms('claims.groups.exists(g, g.startsWith("sre-"))') < 10
    assert cost_ms('arguments.env in ["dev", "test"] && type(arguments.env) == string') < 5
    assert cost_ms('glob(arguments.path, "*a*b*c*")') < 5  # a glob is linear now
    assert cost_ms('arguments.branch.matches("^release/[0-9]+$")') < 5
    assert cost_ms('resource.startsWith("file:///docs/")', "resources") < 1
    assert cost_ms("subject.glob(claims.pattern)") < BUDGET / 1e6


def test_matches_needs_a_literal_pattern_of_bounded_size() -> None:
    assert reason_of("arguments.s.matches(claims.pattern)") == (
        "the pattern of matches() must be a string literal (the library compiles it at every "
        "evaluation: one from a claim or an argument has no bounded cost)"
    )
    # \w is the whole Unicode word class: 100 copies take about 100 ms to compile, per call.
    assert (reason_of(r'subject.matches("\\w{100}")') or "").startswith("may cost up to")
    assert reason_of(r'subject.matches("\\w+@example\\.com")') is None
    small, large = regex_cost("[a-z]+"), regex_cost(r"(\w{10}){10}")
    assert small.compile_ns < regex_cost(r"\w").compile_ns < large.compile_ns
    assert regex_cost("(?i)a{100}").compile_ns > regex_cost("a{100}").compile_ns


def test_a_glob_pattern_is_at_most_128_characters() -> None:
    fits = "*" + "a" * (MAX_GLOB_PATTERN - 1)
    assert reason_of(f'subject.glob("{fits}")') is None
    assert reason_of(f'subject.glob("{fits}b")') == "glob patterns are at most 128 characters"


def test_a_rules_conditions_share_one_budget(tmp_path: Path) -> None:
    # A glob whose pattern comes from the arguments, over a path: a good part of the budget.
    heavy = "arguments.path.glob(arguments.pattern)"
    fitting = int(BUDGET // (cost_ms(heavy) * 1e6))
    assert fitting >= 1
    listed = ", ".join([f"'{heavy}'"] * fitting)
    policy_from(HEAD + f"tools:\n  fits: {{scopes: [], when: [{listed}]}}\n", tmp_path)
    text = HEAD + f"tools:\n  past: {{scopes: [], when: [{listed}, '{heavy}']}}\n"
    with pytest.raises(ConfigError) as caught:
        policy_from(text, tmp_path)
    [problem] = caught.value.problems
    assert f"tools.past.when[{fitting}]: with the rule's conditions before it, may cost" in problem


def test_only_the_arguments_a_rule_reads_are_given_and_bounded(tmp_path: Path) -> None:
    policy = policy_from(
        HEAD + "tools:\n"
        "  keyed: {scopes: [], when: 'arguments.env == \"dev\" && !has(arguments.force)'}\n"
        "  whole: {scopes: [], when: 'arguments.size() < 300'}\n",
        tmp_path,
    )
    caller = dataclasses.replace(who("mcp:access"), claims=frozen_claims({}))
    large = {"env": "dev", "content": "x" * 100_000, "items": list(range(1000))}
    # An argument no condition reads may be any size (it goes upstream, not to CEL).
    assert (
        policy.decide_conditions(caller, AccessQuestion("tools/call", "keyed", None, large)) is None
    )
    refused = policy.decide_conditions(caller, AccessQuestion("tools/call", "whole", None, large))
    assert refused is not None and refused.reason == "arguments_too_large"
    assert refused.rule == "whole" and not refused.allowed and refused.visible
    for fits, past in _at_and_past_the_caps():
        assert (
            policy.decide_conditions(caller, AccessQuestion("tools/call", "whole", None, fits))
            is None
        )
        refused = policy.decide_conditions(
            caller, AccessQuestion("tools/call", "whole", None, past)
        )
        assert refused is not None and refused.reason == "arguments_too_large"


def _at_and_past_the_caps() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(arguments at the bound, one value or character more): values count every map, map
    entry, list and scalar; characters count strings and keys."""
    # {"l": [0, ...]}: the map, its entry, the list, then the items.
    items = MAX_ARGUMENT_VALUES - 3
    values = ({"l": [0] * items}, {"l": [0] * (items + 1)})
    text = MAX_ARGUMENT_CHARACTERS - 1  # the key "s"
    characters = ({"s": "x" * text}, {"s": "x" * (text + 1)})
    return [values, characters]


def test_the_bounds_of_the_model_match_the_gateways_limits() -> None:
    from gateway.auth.bearer import MAX_TOKEN_BYTES
    from gateway.auth.introspection import MAX_RESPONSE_BYTES

    assert TOKEN_BYTES >= MAX_RESPONSE_BYTES and TOKEN_BYTES >= 16_000 >= MAX_TOKEN_BYTES


# --- the parser -------------------------------------------------------------------------------


def test_the_parser_reads_what_the_cost_needs() -> None:
    tree = parse('a.b.exists(x, x in c) && !has(d.e) ? [1, 2u] : {"k": r"\\d"}["k"]', 24)
    assert tree.kind == "call" and tree.text == "?:"
    kinds = sorted(node.kind for node in tree.walk())
    assert kinds.count("macro") == 1 and kinds.count("has") == 1 and "uint" in kinds
    strings = [node.text for node in tree.walk() if node.kind == "string"]
    assert strings == ["k", "\\d", "k"] or sorted(strings) == ["\\d", "k", "k"]
    with pytest.raises(TooDeep):
        parse("(" * 25 + "1" + ")" * 25, 24)
    for broken in ("foo.", "(", "a ? b", "x.exists(1, y)", "has(x)", '"\\U00110000"'):
        with pytest.raises(CelSyntaxError):
            parse(broken, 24)


def _string_literal(text: str) -> str:
    return json.dumps(text)  # a JSON string is a CEL string literal (same escapes)


leaves = st.one_of(
    st.sampled_from(["a", "b", "claims", "x_1", "string"]),
    st.sampled_from(["1", "42", "1u", "0x1F", "2.5", ".5", "1e3", "true", "false", "null"]),
    st.text(alphabet="ab'\"\\\n\u00e9\u2028 {}()[].", max_size=4).map(_string_literal),
    st.sampled_from(["r'a\\d'", 'b"xy"', "'''tri'ple'''", "R'\\w'"]),
)


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.sampled_from(
        ["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "in", "&&", "||"]
    )
    pairs = st.lists(st.tuples(inner, inner), max_size=2)
    return st.one_of(
        st.tuples(inner, binary, inner).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(st.sampled_from(["!", "-", "!!", "--"]), inner).map("".join),
        inner.map(lambda e: f"({e})"),
        st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        pairs.map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"),
        st.tuples(inner, st.sampled_from(["size()", "f", "startsWith('x')"])).map(".".join),
        st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}"),
        st.tuples(inner, st.sampled_from(sorted(MACROS)), inner).map(
            lambda t: f"{t[0]}.{t[1]}(v, {t[2]})"
        ),
        st.sampled_from(["has(a.f)", "has(claims.x.y)"]),
        st.tuples(st.sampled_from(["size", "int", "string", "type", "dyn"]), inner).map(
            lambda t: f"{t[0]}({t[1]})"
        ),
    )


@settings(max_examples=500, deadline=None)
@given(st.recursive(leaves, _extend, max_leaves=10))
def test_every_expression_the_library_compiles_is_read_with_the_same_names(source: str) -> None:
    try:
        program = cel.compile(source)
    except Exception:
        return
    try:
        tree = parse(source, 24)
    except TooDeep:
        return
    # The library names what is read: a macro's variable counts where the body reads it (a
    # filter's expansion always does: it appends the element).
    binders = {
        id(node.args[1]) for node in tree.walk() if node.kind == "macro" and node.text != "filter"
    }
    names = {node.text for node in tree.walk() if node.kind == "ident" and id(node) not in binders}
    assert names == set(program.variables()), source


# --- check, as operators run it ---------------------------------------------------------------

GATEWAY = """\
resource: https://mcp.example.com/mcp
issuer: {url: https://id.example.com, client_id: mcp-gateway, client_secret: {env: X_UNSET}}
backend: {url: https://tools.example.com/mcp, credential: {type: bearer, token: {env: X_UNSET}}}
policy: policy.yaml
"""


def test_check_refuses_the_costly_expressions_at_their_position(tmp_path: Path) -> None:
    (tmp_path / "gateway.yaml").write_text(GATEWAY)
    (tmp_path / "policy.yaml").write_text(
        HEAD + "tools:\n"
        f"  cubic: {{scopes: [], when: '{CUBIC}'}}\n"
        "  globs:\n"
        "    scopes: []\n"
        "    when:\n"
        "      - 'glob(arguments.path, \"*a*b*c*\")'\n"
        "      - 'arguments.paths.exists(p, arguments.patterns.exists(q, p.glob(q)))'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MCP_GATEWAY_CONFIG"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway.commands",
            "check",
            "--skip-secrets",
            "--config",
            "gateway.yaml",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"{tmp_path / 'policy.yaml'}:4:23: tools.cubic.when: may cost up")
    assert lines[1].startswith(f"{tmp_path / 'policy.yaml'}:9:9: tools.globs.when[1]: may cost up")
    assert "docs/policy.md#cost" in lines[0] and "2 problems" in result.stderr
