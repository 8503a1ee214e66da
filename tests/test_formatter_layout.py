"""Every statement is laid out by ``ruff format`` (issue 44 item 3): none is kept from it with a
``fmt: skip`` or ``fmt: off`` comment. A table that reads badly one item per line is written as
data the formatter leaves alone instead (short rows, a string per row, a data file)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]
SUPPRESSION: Final = re.compile(r"#\s*fmt:\s*(skip|off)\b")


def suppressions(root: Path) -> list[str]:
    """``path:line`` (relative to ``root``) of every formatter suppression comment in the
    Python files under it."""
    return [
        f"{path.relative_to(root)}:{number}"
        for path in sorted(root.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if SUPPRESSION.search(line)
    ]


def test_no_statement_is_kept_from_the_formatter() -> None:
    found = {part: suppressions(ROOT / part) for part in ("gateway", "tests", "scripts")}
    assert found == {"gateway": [], "tests": [], "scripts": []}


def test_a_suppression_comment_is_found(tmp_path: Path) -> None:
    text = "x = [1,  2]  # fmt" + ": skip\ny = 1\n#  fmt" + ":off\n"
    (tmp_path / "sample.py").write_text(text, encoding="utf-8")
    assert suppressions(tmp_path) == ["sample.py:1", "sample.py:3"]
