"""The policy's ladder as pure functions: (rule, principal) -> Decision.

MCP 2025-11-25 / 2026-07-28 authorization §Scope challenge handling: when added scopes would let
the caller in, the answer is a step-up 403 naming every scope the operation needs (baseline
included) in one challenge. Anything the caller must not learn about (no rule, ``deny``, a client
or subject condition that fails) is answered like a tool that does not exist: the decision is
``visible=False`` and the front door renders it as ``-32602`` Unknown tool.

The ladder for a tool, first match wins (steps 1 and 2 are the lookup of
:meth:`gateway.policy.policy_set.PolicySet.decide_tool`, 3 to 7 :func:`evaluate_rule`):

1. no rule governs the name                     -> hidden  ``no_rule``
2. two equally specific patterns match (a tie)  -> hidden  ``tie`` (rejected at load; defence)
3. the rule says ``deny: true``                 -> hidden  ``deny``
4. ``clients`` set and no entry names client_id -> hidden  ``client``
5. ``subjects`` set and no entry matches sub     -> hidden  ``subject``
   (an entry applies to one issuer's principals: :mod:`.issuers`)
6. scopes cover baseline + ``scopes`` (+ one ``any_of`` set) -> allowed ``allow``
7. otherwise                                    -> forbidden ``scope`` (step-up)

"Cover" accounts for ``scope_hierarchy`` (:mod:`.hierarchy`): a granted scope also satisfies
every scope it implies. Challenges and ``missing_scopes`` still name the scopes the rule lists
(the least privilege), and ``granted_scopes`` names the caller's own scopes the decision used.

Any exception while evaluating denies and hides (``error``): fail closed.

Prompts (``prompts/get``) and resources (``resources/read``) walk the same ladder over their own
section; a hidden prompt is answered like an unknown prompt (``-32602``), a hidden resource like
one that does not exist (``-32602`` / legacy ``-32002``). A resource URI is normalised first
(:func:`gateway.policy.uri.normalize_uri`); one that has no normal form has no rule (the front
door refuses an ambiguous one before asking: :func:`gateway.policy.uri.resource_uri`). A resource
template is decided for listing and completion only, over the rules :func:`reachable_rules`
finds. A method needs the baseline and its own ``methods:`` scopes (:func:`evaluate_scopes`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from gateway.policy.hierarchy import NO_HIERARCHY, ScopeHierarchy
from gateway.policy.issuers import admits_client, admits_subject
from gateway.policy.rules import Rule, RuleTable
from gateway.policy.uri_patterns import UriPattern, overlap, template_pattern
from gateway.seams import Decision, Principal

__all__ = [
    "DISCOVER_ALIASES",
    "HIDDEN_ERROR",
    "HIDDEN_NO_RULE",
    "REASONS",
    "evaluate_rule",
    "evaluate_scopes",
    "reachable_rules",
    "union",
]

REASONS: Final = (
    "allow",
    "scope",
    "no_rule",
    "tie",
    "deny",
    "client",
    "subject",
    "error",
    "condition",
    "condition_error",
    "arguments_too_large",
)
"""Every ``Decision.reason`` this module produces (a bounded set: safe as a metric label)."""

DISCOVER_ALIASES: Final = {"initialize": "server/discover"}
"""Legacy ``initialize`` is the handshake that ``server/discover`` replaced (MCP 2026-07-28), so
the ``server/discover`` method rule governs both eras."""

HIDDEN_NO_RULE: Final = Decision(allowed=False, visible=False, rule=None, reason="no_rule")
HIDDEN_ERROR: Final = Decision(allowed=False, visible=False, rule=None, reason="error")


def reachable_rules(table: RuleTable, uri_template: str) -> tuple[Rule, ...] | None:
    """The rules of ``table`` that can match some URI ``uri_template`` expands to (exact URIs the
    template's pattern matches, patterns that overlap it); None when it is no usable template."""
    pattern = template_pattern(uri_template)
    if pattern is None:
        return None
    found = [rule for uri, rule in table.exact.items() if pattern.matches(uri)]
    found += [
        rule
        for rule in table.patterns
        if isinstance(rule.glob, UriPattern) and overlap(pattern, rule.glob) is not None
    ]
    return tuple(found)


def evaluate_rule(
    baseline: tuple[str, ...],
    rule: Rule,
    principal: Principal,
    hierarchy: ScopeHierarchy = NO_HIERARCHY,
) -> Decision:
    """Steps 3-7 of the ladder for one known rule."""
    if rule.deny:
        # An explicit deny hides the tool, whatever else the rule says.
        return Decision(allowed=False, visible=False, rule=rule.key, reason="deny")
    # Each entry names a client or subject of one issuer (.issuers): another issuer's
    # "ops-console" or "alice" is not on the list.
    if rule.clients is not None and not admits_client(rule.clients, principal):
        # Not an allow-listed client: do not reveal the tool exists (no step-up hint either).
        return Decision(allowed=False, visible=False, rule=rule.key, reason="client")
    if rule.subjects is not None and not admits_subject(rule.subjects, principal):
        return Decision(allowed=False, visible=False, rule=rule.key, reason="subject")
    held = principal.scopes
    granted = hierarchy.expand(held)
    base = union(baseline, rule.scopes)
    options = [union(base, alternative) for alternative in rule.any_of] or [base]
    for option in options:
        if all(scope in granted for scope in option):
            return Decision(
                allowed=True,
                visible=True,
                rule=rule.key,
                required_scopes=option,
                reason="allow",
                granted_scopes=hierarchy.holders(option, held) if hierarchy else option,
                guardrails=rule.guardrails,
                approval=rule.approval,
            )
    # Step-up: challenge with the option that needs the fewest additional scopes; min() keeps
    # the first listed on a tie, so the challenge is deterministic for a given token.
    best = min(options, key=lambda option: sum(scope not in granted for scope in option))
    return Decision(
        allowed=False,
        visible=True,
        rule=rule.key,
        required_scopes=best,
        missing_scopes=tuple(scope for scope in best if scope not in granted),
        reason="scope",
        granted_scopes=hierarchy.holders(best, held),
    )


def evaluate_scopes(
    needed: tuple[str, ...],
    rule: str | None,
    principal: Principal,
    hierarchy: ScopeHierarchy = NO_HIERARCHY,
) -> Decision:
    """A method's ladder (``methods:``): allowed when the scopes cover ``needed`` (the baseline
    and the method's own), else a step-up naming them."""
    granted = hierarchy.expand(principal.scopes)
    missing = tuple(scope for scope in needed if scope not in granted)
    if not missing:
        return Decision(
            allowed=True,
            visible=True,
            rule=rule,
            required_scopes=needed,
            reason="allow",
            granted_scopes=hierarchy.holders(needed, principal.scopes) if hierarchy else needed,
        )
    return Decision(
        allowed=False,
        visible=True,
        rule=rule,
        required_scopes=needed,
        missing_scopes=missing,
        reason="scope",
        granted_scopes=hierarchy.holders(needed, principal.scopes),
    )


def union(*groups: Iterable[str]) -> tuple[str, ...]:
    """Ordered union: first occurrence wins, so challenges list the baseline first."""
    return tuple(dict.fromkeys(scope for group in groups for scope in group))
