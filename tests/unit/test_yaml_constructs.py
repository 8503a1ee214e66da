"""The one YAML loader refuses what expands, recurses or is not JSON, at ``file:line:col``.

Issue 32 item 4: a recursive alias and the ``<<:`` merge key raised tracebacks out of ``check``
and ``serve``, and nested aliases expanded without bound (a few hundred bytes ran past 60 s).
Anchors, aliases and merge keys are refused where they stand; nesting, non-JSON scalars and
tags the safe loader cannot build become findings too, never exceptions. The same refusals
through ``check``, ``serve`` and a hot reload: tests/integration/test_yaml_constructs_process.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.policy.policy_loader import load_policy
from gateway.yaml_source import MAX_DEPTH, load_yaml
from tests.support.yaml_bombs import LAUGHS

ANCHOR = "YAML anchors (&{}) are not supported: write the value out"
ALIAS = "YAML aliases (*{}) are not supported: write the value out"
DEEP = f"nested deeper than {MAX_DEPTH} levels of mappings and lists"
TIMESTAMP = "is read as a YAML timestamp: quote it to make it a string"


def problems_of(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "doc.yaml"
    path.write_text(text)
    doc = load_yaml(path)
    assert all(p.startswith(f"{path}:") for p in doc.problems), doc.problems
    return [p.removeprefix(f"{path}:") for p in doc.problems]


def test_the_billion_laughs_is_refused_at_its_first_anchor_without_expanding(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    found = problems_of(tmp_path, LAUGHS)
    assert time.monotonic() - started < 5.0  # milliseconds; expanding it took minutes
    assert found == ["1:4: " + ANCHOR.format("a")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: &x [1, *x]\n", "1:4: " + ANCHOR.format("x")),
        ("a: &x 1\nb: 2\n", "1:4: " + ANCHOR.format("x")),
        # An alias of an anchor PyYAML never saw is refused as an alias, not a syntax error.
        ("a: 1\nb: *nowhere\n", "2:4: " + ALIAS.format("nowhere")),
        ("a:\n  - &k {x: 1}\n", "2:5: " + ANCHOR.format("k")),
    ],
    ids=["recursive", "plain-anchor", "alias", "nested-anchor"],
)
def test_anchors_and_aliases_are_refused_at_their_position(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert problems_of(tmp_path, text) == [expected]


def test_a_merge_key_is_refused_and_the_rest_of_the_file_still_checked(tmp_path: Path) -> None:
    found = problems_of(tmp_path, "tools:\n  <<: {a: {scopes: []}}\n  b: 1\nc: !!binary aGk=\n")
    assert found == [
        "2:3: tools.<<: YAML merge keys (<<) are not supported: write the keys out",
        "4:1: c: unsupported YAML value",
    ]


def test_a_quoted_double_angle_key_is_an_ordinary_string(tmp_path: Path) -> None:
    path = tmp_path / "doc.yaml"
    path.write_text('"<<": 1\n')
    doc = load_yaml(path)
    assert doc.problems == []
    assert doc.value == {"<<": 1}


def test_nesting_is_bounded_at_the_limit(tmp_path: Path) -> None:
    # The top-level mapping is one level: MAX_DEPTH - 1 lists inside it is the deepest allowed.
    deepest = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert problems_of(tmp_path, deepest) == []
    one_more = "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n"
    column = 3 + MAX_DEPTH  # 1-based column of the list that is one too deep
    assert problems_of(tmp_path, one_more) == [f"1:{column}: {DEEP}"]


def test_nesting_far_past_the_interpreters_recursion_limit_is_a_finding(tmp_path: Path) -> None:
    found = problems_of(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert found == [f"1:{3 + MAX_DEPTH}: {DEEP}"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A value's finding is at its key, as every finding about a mapping's value.
        ("when: 2026-12-03\n", f"1:1: when: {TIMESTAMP}"),
        ("when: 2026-12-03 10:00:00\n", f"1:1: when: {TIMESTAMP}"),
        ("blob: !!binary aGk=\n", "1:1: blob: unsupported YAML value"),
        ("run: !!python/name:os.system x\n", "1:1: run: unsupported YAML value"),
        ("!!python/name:os.system x: 1\n", "1:1: x: keys must be strings"),
        ("? [a, b]\n: 1\n", "1:3: ?: keys must be strings"),
        ("2026-12-03: 1\n", "1:1: 2026-12-03: keys must be strings"),
    ],
    ids=["date", "datetime", "binary", "python-tag", "python-tag-key", "list-key", "date-key"],
)
def test_values_outside_json_are_findings_not_tracebacks(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert problems_of(tmp_path, text) == [expected]


def test_the_policy_loader_raises_a_config_error_with_the_position(tmp_path: Path) -> None:
    policy = tmp_path / "laughs.yaml"
    policy.write_text("version: 1\nbaseline_scopes: [mcp:access]\ntools: {}\n" + LAUGHS)
    with pytest.raises(ConfigError) as caught:
        load_policy([policy])
    assert caught.value.problems == [f"{policy}:4:4: " + ANCHOR.format("a")]
