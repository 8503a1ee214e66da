"""The status table is complete in both directions (docs/errors.md, gateway/errors/, tests).

Every row class in :mod:`gateway.errors` is documented in ``docs/errors.md`` and has at least one
test marked ``@pytest.mark.row("<row>")``; no test names a row that does not exist. Marks are
found by reading the test files' syntax trees, so a test that is skipped still counts.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gateway.errors import all_rows

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
DOC = ROOT / "docs" / "errors.md"

NON_ERROR_ROWS = frozenset({"accepted_notification", "session_terminated", "tool_error_result"})
"""Outcomes the status table fixes that are not GatewayErrors (documented in docs/errors.md)."""


def _row_marks() -> dict[str, list[str]]:
    """row name -> ``file:line`` of every ``pytest.mark.row("...")`` in tests/."""
    found: dict[str, list[str]] = {}
    for path in TESTS.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "row"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "mark"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                found.setdefault(node.args[0].value, []).append(where)
    return found


def _documented_rows() -> set[str]:
    # A row is documented when it starts a table line: | `row_name` | ...
    return set(re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text(encoding="utf-8"), re.MULTILINE))


def test_every_row_is_documented_in_docs_errors_md() -> None:
    missing = sorted(cls.row for cls in all_rows() if cls.row not in _documented_rows())
    assert missing == [], f"rows missing from docs/errors.md: {missing}"


def test_docs_errors_md_lists_no_row_that_does_not_exist() -> None:
    known = {cls.row for cls in all_rows()} | NON_ERROR_ROWS
    assert sorted(_documented_rows() - known) == []


def test_every_row_has_a_marked_test() -> None:
    marks = _row_marks()
    missing = sorted(cls.row for cls in all_rows() if cls.row not in marks)
    assert missing == [], f"rows without a @pytest.mark.row test: {missing}"


def test_no_test_names_a_row_that_does_not_exist() -> None:
    known = {cls.row for cls in all_rows()} | NON_ERROR_ROWS
    unknown = {row: where for row, where in _row_marks().items() if row not in known}
    assert unknown == {}


def test_each_row_has_a_distinct_name_and_a_fixed_status() -> None:
    rows = all_rows()
    assert len({cls.row for cls in rows}) == len(rows)
    for cls in rows:
        assert 200 <= cls.status < 600, cls.row
        assert cls.legacy_status in (None, 200, cls.status), cls.row
