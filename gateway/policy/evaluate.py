"""Policy evaluation as pure functions: (policy, principal, tool or method) -> Decision.

MCP 2025-11-25 / 2026-07-28 authorization §Scope challenge handling: when added scopes would let
the caller in, the answer is a step-up 403 naming every scope the operation needs (baseline
included) in one challenge. Anything the caller must not learn about (no rule, ``deny``, a client
or subject condition that fails) is answered like a tool that does not exist: the decision is
``visible=False`` and the front door renders it as ``-32602`` Unknown tool.

The ladder for a tool, first match wins:

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
template is decided by :func:`evaluate_template` for listing and completion only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from gateway.policy.conditions import (
    ArgumentsTooLarge,
    ConditionFailed,
    call_values,
    conditions_hold,
)
from gateway.policy.hierarchy import NO_HIERARCHY, ScopeHierarchy
from gateway.policy.issuers import admits_client, admits_subject
from gateway.policy.uri import UriPattern, normalize_uri, overlap, template_pattern
from gateway.seams import Decision, Principal

if TYPE_CHECKING:
    from gateway.policy.model import PolicySet, Rule, RuleTable

__all__ = [
    "DISCOVER_ALIASES",
    "HIDDEN_NO_RULE",
    "REASONS",
    "evaluate_conditions",
    "evaluate_method",
    "evaluate_prompt",
    "evaluate_resource",
    "evaluate_rule",
    "evaluate_template",
    "evaluate_tool",
    "reachable_rules",
]

REASONS: Final = (
    "allow", "scope", "no_rule", "tie", "deny", "client", "subject", "error",
    "condition", "condition_error", "arguments_too_large",
)  # fmt: skip
"""Every ``Decision.reason`` this module produces (a bounded set: safe as a metric label)."""

DISCOVER_ALIASES: Final = {"initialize": "server/discover"}
"""Legacy ``initialize`` is the handshake that ``server/discover`` replaced (MCP 2026-07-28), so
the ``server/discover`` method rule governs both eras."""

HIDDEN_NO_RULE: Final = Decision(allowed=False, visible=False, rule=None, reason="no_rule")
_HIDDEN_ERROR: Final = Decision(allowed=False, visible=False, rule=None, reason="error")


def evaluate_tool(policy: PolicySet, principal: Principal, tool: str) -> Decision:
    """Decide whether ``principal`` may call ``tool`` (and whether it may know the tool)."""
    try:
        rule, tied = policy.lookup(tool)
        if tied:
            # Unreachable after load-time checks; if it ever happens, nobody wins the tie.
            return Decision(
                allowed=False, visible=False, rule=rule.key if rule else None, reason="tie"
            )
        if rule is None:
            # Default deny: a tool without a rule does not exist for any caller.
            return HIDDEN_NO_RULE
        return evaluate_rule(policy.baseline_scopes, rule, principal, policy.hierarchy)
    except Exception:  # SECURITY: an evaluation error denies (fail closed)
        return _HIDDEN_ERROR


def evaluate_conditions(
    policy: PolicySet,
    principal: Principal,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    section: str = "tools",
    backend: str = "",
    client_ip: str = "",
) -> Decision | None:
    """After the ladder allowed ``name``: its rule's ``when:`` conditions (all must hold).

    A condition that is false refuses with ``condition``; one that cannot be evaluated (a
    missing key without ``has()``, a non-boolean result) with ``condition_error``: both are
    visible refusals without step-up (more scopes would not help). Never an allow on error.
    Arguments the conditions read that are over their bound refuse with
    ``arguments_too_large`` before any condition runs. ``arguments=None`` is a listing
    (``tools/list``, ``prompts/list``): only the conditions that do not read ``arguments`` are
    decided there, the others wait for the call.
    """
    rule: Rule | None = None
    try:
        if section == "resources":
            # The condition reads the URI the rule was decided on (a listing passes the
            # backend's spelling): its normal form; one with none has no rule.
            normalized = normalize_uri(name)
            if normalized is None:
                return None
            name = normalized
        rule = _governing(policy, section, name)
        if rule is None or not rule.when:
            return None
        conditions = rule.when
        if arguments is None:
            conditions = tuple(c for c in conditions if c.listable)
            if not conditions:
                return None
        call = call_values(
            conditions, section, name, arguments, backend=backend, client_ip=client_ip
        )
        if conditions_hold(conditions, principal, call) is None:
            return None
        return Decision(allowed=False, visible=True, rule=rule.key, reason="condition")
    except ArgumentsTooLarge:
        return Decision(allowed=False, visible=True, rule=rule.key if rule else None,
                        reason="arguments_too_large")  # fmt: skip
    except ConditionFailed as exc:
        return Decision(
            allowed=False,
            visible=True,
            rule=rule.key if rule else None,
            reason="condition_error",
            detail=str(exc),
        )
    except Exception as exc:  # SECURITY: an evaluation error denies (fail closed)
        return Decision(
            allowed=False, visible=True, rule=rule.key if rule else None,
            reason="condition_error", detail=type(exc).__name__,
        )  # fmt: skip


def _governing(policy: PolicySet, section: str, name: str) -> Rule | None:
    """The rule that governs ``name`` in ``section`` (None: none, or a tie)."""
    if section == "tools":
        return policy.rule_for(name)
    if section == "prompts":
        rule, tied = policy.prompts.lookup(name)
    else:
        normalized = normalize_uri(name)
        if normalized is None:
            return None
        rule, tied = policy.resources.lookup(normalized)
    return None if tied else rule


def evaluate_prompt(policy: PolicySet, principal: Principal, prompt: str) -> Decision:
    """Decide whether ``principal`` may get ``prompt`` (the tool ladder over ``prompts:``)."""
    try:
        return _in_table(policy.prompts, policy, principal, prompt)
    except Exception:  # SECURITY: an evaluation error denies (fail closed)
        return _HIDDEN_ERROR


def evaluate_resource(policy: PolicySet, principal: Principal, uri: str) -> Decision:
    """Decide whether ``principal`` may read ``uri`` (normalised, then the ladder)."""
    try:
        normalized = normalize_uri(uri)
        if normalized is None:
            return HIDDEN_NO_RULE
        return _in_table(policy.resources, policy, principal, normalized)
    except Exception:  # SECURITY: an evaluation error denies (fail closed)
        return _HIDDEN_ERROR


def evaluate_template(policy: PolicySet, principal: Principal, uri_template: str) -> Decision:
    """Whether a resource template is shown (``resources/templates/list``) and completed.

    The template's expansions are approximated by a pattern (:func:`.uri.template_pattern`, a
    superset); the decision is the best one among the rules that can match one of them: allowed
    if one allows, else step-up if one would with more scopes, else hidden. A read of an
    expansion is decided on its own URI (:func:`evaluate_resource`), so a template shown here
    can still expand to URIs that are refused.
    """
    try:
        reachable = policy.template_rules(uri_template)
        if reachable is None:
            return HIDDEN_NO_RULE
        best: Decision | None = None
        for rule in reachable:
            decision = evaluate_rule(policy.baseline_scopes, rule, principal, policy.hierarchy)
            if decision.allowed:
                return decision
            if decision.visible and best is None:
                best = decision
        return best if best is not None else HIDDEN_NO_RULE
    except Exception:  # SECURITY: an evaluation error denies (fail closed)
        return _HIDDEN_ERROR


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


def _in_table(table: RuleTable, policy: PolicySet, principal: Principal, name: str) -> Decision:
    rule, tied = table.lookup(name)
    if tied:
        return Decision(allowed=False, visible=False, rule=rule.key if rule else None, reason="tie")
    if rule is None:
        return HIDDEN_NO_RULE
    return evaluate_rule(policy.baseline_scopes, rule, principal, policy.hierarchy)


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
    base = _union(baseline, rule.scopes)
    options = [_union(base, alternative) for alternative in rule.any_of] or [base]
    for option in options:
        if all(scope in granted for scope in option):
            return Decision(
                allowed=True,
                visible=True,
                rule=rule.key,
                required_scopes=option,
                reason="allow",
                granted_scopes=hierarchy.holders(option, held) if hierarchy else option,
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


def evaluate_method(policy: PolicySet, principal: Principal, method: str) -> Decision:
    """Baseline plus the method's extra scopes (``methods:``); other methods need the baseline."""
    try:
        key = DISCOVER_ALIASES.get(method, method)
        method_rule = policy.methods.get(key)
        needed = _union(policy.baseline_scopes, method_rule.scopes if method_rule else ())
        rule = key if method_rule else None
        hierarchy = policy.hierarchy
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
    except Exception:  # SECURITY: an evaluation error denies (fail closed)
        return _HIDDEN_ERROR


def _union(*groups: Iterable[str]) -> tuple[str, ...]:
    """Ordered union: first occurrence wins, so challenges list the baseline first."""
    return tuple(dict.fromkeys(scope for group in groups for scope in group))
