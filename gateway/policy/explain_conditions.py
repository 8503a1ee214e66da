"""``policy explain``: the ``when:`` conditions of each explained rule and their result for the
principal (and ``--arguments``), evaluated by the gateway's own functions
(:mod:`.conditions`).

Each condition is shown with its position, its source, where the gateway decides it
(``listing``: it does not read ``arguments``, so ``tools/list`` decides it too; ``call``: only
the call can) and its result: ``true``, ``false``, ``error: <reason>`` (a refusal at run time),
or ``not evaluated: needs --arguments``. ``backend`` and ``request.ip`` are empty strings here
(explain has no request); ``now`` is the clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.policy.conditions import (
    ArgumentsTooLarge,
    Condition,
    ConditionFailed,
    TokenContext,
    call_values,
    conditions_hold,
    token_context,
)
from gateway.policy.policy_set import PolicySet
from gateway.policy.rules import Rule
from gateway.policy.uri import normalize_uri
from gateway.seams import Principal

__all__ = ["condition_lines", "explain_conditions", "row_rule"]


def explain_conditions(
    policy: PolicySet,
    principal: Principal,
    rows: list[dict[str, Any]],
    *,
    section: str,
    by_key: bool,
    arguments: Mapping[str, Any] | None,
) -> None:
    """Add ``conditions`` to each row whose rule has ``when:``; ``by_key``: the rows name rule
    keys (``--all`` without a catalog), not names."""
    for row in rows:
        name = row["name"]
        rule = row_rule(policy, section, name, by_key=by_key)
        if rule is None or not rule.when:
            continue
        token = policy.token_contexts.of(principal, token_context)
        row["conditions"] = [
            _one(condition, token, section, name, arguments) for condition in rule.when
        ]


def condition_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The text form: one line per condition, under its row's name."""
    lines = []
    for row in rows:
        for shown in row.get("conditions", ()):
            lines.append(
                f"condition: {row['name']}: {shown['result']} ({shown['decided_at']}) "
                f"{shown['expression']}  [{shown['where']}]"
            )
    return lines


def _one(
    condition: Condition,
    token: TokenContext | str,
    section: str,
    name: str,
    arguments: Mapping[str, Any] | None,
) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "where": condition.where,
        "expression": condition.source,
        "reads": list(condition.reads),
        "decided_at": "listing" if condition.listable else "call",
    }
    if not condition.listable and arguments is None:
        shown["result"] = "not evaluated: needs --arguments"
        return shown
    try:
        call = call_values((condition,), section, name, arguments, backend="", client_ip="")
    except ArgumentsTooLarge:
        shown["result"] = "refused: the arguments it reads are too large"
        return shown
    try:
        failed = conditions_hold((condition,), token, call)
    except ConditionFailed as exc:
        shown["result"] = f"error: {str(exc).removeprefix(condition.where + ': ')}"
        return shown
    shown["result"] = "true" if failed is None else "false"
    return shown


def row_rule(policy: PolicySet, section: str, name: str, *, by_key: bool) -> Rule | None:
    """The rule an explained row stands for: ``name`` is a rule key (``by_key``) or a name
    the rule governs."""
    if section == "tools":
        if by_key:
            return policy.exact.get(name) or next((r for r in policy.globs if r.key == name), None)
        return policy.rule_for(name)
    table = policy.prompts if section == "prompts" else policy.resources
    if by_key:
        return table.find(name)
    if section == "resources":
        normalized = normalize_uri(name)
        if normalized is None:
            return None
        name = normalized
    rule, tied = table.lookup(name)
    return None if tied else rule
