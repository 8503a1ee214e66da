"""``policy explain``: whose names each explained rule's ``subjects`` and ``clients`` are.

Every entry applies to one issuer (:mod:`.issuers`): a plain one to the first configured, a
qualified one to the issuer it names. A row whose rule has such entries gets ``clients`` /
``subjects`` (``name``, ``issuer``, ``qualified``), and the text form one ``who:`` line, so an
operator sees why another issuer's ``alice`` is hidden (reason ``subject``).
"""

from __future__ import annotations

from typing import Any, Final

from gateway.policy.explain_conditions import row_rule
from gateway.policy.issuers import describe_entries
from gateway.policy.policy_set import PolicySet

__all__ = ["FIRST_ISSUER", "entry_lines", "explain_entries"]

FIRST_ISSUER: Final = "(the first issuer)"
"""The principal's issuer without a configuration (``--policy``): the policy's plain
``subjects`` and ``clients`` entries apply to it, qualified ones to none."""


def explain_entries(
    policy: PolicySet, rows: list[dict[str, Any]], *, section: str, by_key: bool
) -> None:
    """Add ``clients`` and ``subjects`` to each row whose rule lists them; ``by_key``: the rows
    name rule keys (``--all`` without a catalog), not names."""
    for row in rows:
        rule = row_rule(policy, section, row["name"], by_key=by_key)
        if rule is None:
            continue
        for kind, found in (("clients", rule.clients), ("subjects", rule.subjects)):
            if found is not None:
                row[kind] = describe_entries(found)


def entry_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The text form: one ``who:`` line per row with entries."""
    lines = []
    for row in rows:
        parts = [
            f"{kind} {', '.join(_entry(shown) for shown in row[kind])}"
            for kind in ("clients", "subjects")
            if kind in row
        ]
        if parts:
            lines.append(f"who: {row['name']}: {'; '.join(parts)}")
    return lines


def _entry(shown: dict[str, Any]) -> str:
    issuer = shown["issuer"] or "no issuer"
    if shown["qualified"]:
        return f"{shown['name']!r} of {issuer}"
    if issuer == FIRST_ISSUER:
        return f"{shown['name']!r} of the first issuer"
    return f"{shown['name']!r} of the first issuer ({issuer})"
