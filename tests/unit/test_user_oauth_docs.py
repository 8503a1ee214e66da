"""docs/user-authorization.md's "Per-user upstream authorization" chapter has what issue 45 asks
of it ("how it works, the login surface, the proxy routes, provider recipes, the states, failure
rows in docs/errors.md"), and says what the code does: the states it lists are the store's, and
every refusal it names is a row of the status table. (The recipes themselves are exercised in
tests/integration/backend/test_user_oauth_recipes.py, the routes in tests/unit/test_deploy_files.py
and tests/unit/test_kubernetes.py.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, get_args

from gateway.state.upstream_tokens import ConnectionState

ROOT: Final = Path(__file__).resolve().parents[2]
GUIDE: Final = (ROOT / "docs" / "user-authorization.md").read_text(encoding="utf-8")
ERRORS: Final = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
OPERATIONS: Final = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
CHAPTER: Final = GUIDE.split("\n## Per-user upstream authorization\n", 1)[1]
ROWS: Final = (
    "url_elicitation_required",
    "upstream_connection_required",
    "upstream_token_unavailable",
    "connect_state_invalid",
    "connect_issuer_mismatch",
    "connect_failed",
    "connect_unavailable",
)


def test_the_chapter_has_the_sections_the_issue_asks_for() -> None:
    headings = re.findall(r"^### (.+)$", CHAPTER, re.MULTILINE)
    for wanted in ("How it works", "The pages", "The token store", "Provider recipes"):
        assert wanted in headings, headings
    assert "\n## Login surface\n" in GUIDE  # the login surface, the chapter before
    # The proxy routes: linked, and there.
    assert "operations.md#the-login-surfaces-routes" in CHAPTER
    assert "\n### The login surface's routes\n" in OPERATIONS


def test_the_states_it_lists_are_the_stores() -> None:
    (states,) = re.findall(r"^- \*\*States\*\*: (.+?)(?=^- \*\*)", CHAPTER, re.MULTILINE | re.S)
    named = set(re.findall(r"`([a-z_]+)` \(", states))
    assert named == set(get_args(ConnectionState))


def test_every_refusal_it_names_is_a_row_of_the_status_table() -> None:
    for row in ROWS:
        assert f"`{row}`" in CHAPTER, row
        assert re.search(rf"^\| `{row}` \|", ERRORS, re.MULTILINE), row
