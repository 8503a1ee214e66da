"""docs/operations.md lists exactly the ``outcome`` values the access line and the audit event
carry (issue 32 item 12: the access line's list lacked ``input_required`` / ``input_refused``
and ``exchange_failed``, and both named an ``oversize`` the code never writes)."""

from __future__ import annotations

import re
from pathlib import Path

from gateway.observability.metric_labels import BACKEND_OUTCOMES

ROOT = Path(__file__).resolve().parents[3]
OPERATIONS = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
# Set by the front door besides the backend's outcomes (gateway/http/methods/input_rounds.py), and
# for the audit event only, when nothing was dispatched (gateway/observability/access.py).
FRONT_DOOR = {"input_refused"}
AUDIT_ONLY = {"denied", "rejected"}


def documented(row_start: str) -> set[str]:
    (row,) = [line for line in OPERATIONS.splitlines() if line.startswith(row_start)]
    cell = row.split(" | ", 1)[1]  # the cells after the name
    return set(re.findall(r"`([a-z_]+)`", cell)) - {"null", "error_row"}


def test_the_access_line_outcomes_are_documented_exactly() -> None:
    assert documented("| `outcome` | `tools/call` outcome") == set(BACKEND_OUTCOMES) | FRONT_DOOR


def test_the_audit_event_outcomes_are_documented_exactly() -> None:
    assert documented("| `outcome` | string |") == set(BACKEND_OUTCOMES) | FRONT_DOOR | AUDIT_ONLY
