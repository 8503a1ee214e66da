"""The rules a policy is made of: :class:`Rule` (one entry of ``tools``, ``prompts`` or
``resources``), :class:`RuleTable` (one section, with its precedence: an exact key beats every
pattern, then specificity) and :class:`MethodRule` (the extra scopes of a JSON-RPC method).

Built by :func:`gateway.policy.policy_loader.load_policy`, read by
:class:`~gateway.policy.policy_set.PolicySet` and by the ladder of :mod:`gateway.policy.evaluate`;
never changed after the load.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from gateway.policy.conditions import Condition
from gateway.policy.glob import Glob
from gateway.policy.issuers import Entry
from gateway.policy.uri_patterns import UriPattern
from gateway.seams import ApprovalRule, ToolOverride

__all__ = ["EMPTY_TABLE", "LOOKUP_CACHE_SIZE", "MethodRule", "Rule", "RuleTable", "match_rules"]

LOOKUP_CACHE_SIZE: Final = 4096
"""Memoised name -> rule lookups per table (and per policy set); the memo starts over when full."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One entry of ``tools``, ``prompts`` or ``resources``: the conditions under which the
    matching tools may be called, prompts got, resources read."""

    key: str
    """The tool or prompt name or pattern, or the resource URI or pattern, as written."""
    where: str
    """``file:line:col`` of the key, for warnings and ``policy explain``."""
    scopes: tuple[str, ...] = ()
    """All of these are required (besides the baseline)."""
    any_of: tuple[tuple[str, ...], ...] = ()
    """When non-empty, one of these sets is required in addition to ``scopes``."""
    clients: tuple[Entry, ...] | None = None
    """client_id allowlist, each entry of one issuer (:mod:`.issuers`); None means any client."""
    subjects: tuple[Entry, ...] | None = None
    """``sub`` allowlist (names or patterns), each entry of one issuer; None means any
    subject."""
    deny: bool = False
    rate_limit: tuple[int, float] | None = None
    """(count, per_seconds) per subject."""
    max_concurrency: int | None = None
    """Calls in flight per subject."""
    tasks: bool = False
    """``tasks: true``: a call may become a task (the tasks extension; tools rules only)."""
    description: str | None = None
    glob: Glob | UriPattern | None = field(default=None, compare=False)
    """Set when ``key`` contains a wildcard (a resource pattern: normalised, :mod:`.uri`)."""
    section: str = "tools"
    """``tools``, ``prompts`` or ``resources``: the section the rule stands in."""
    when: tuple[Condition, ...] = field(default=(), compare=False)
    """``when:`` conditions (:mod:`.conditions`), all must hold; decided at the call (and, for
    those that do not read ``arguments``, at the listing)."""
    override: ToolOverride | None = field(default=None, compare=False)
    """``override:`` (:mod:`.overrides`): how the tools this rule governs are exposed."""
    guardrails: tuple[str, ...] = ()
    """``guardrails:``: the processors of gateway.yaml's ``guardrails:`` this rule's content
    is shown to, in order (docs/policy.md#guardrails)."""
    approval: ApprovalRule | None = None
    """``approval:`` (tools rules): a person approves each call first
    (docs/policy.md#approvals)."""


@dataclass(slots=True, eq=False)
class RuleTable:
    """The rules of one section: exact keys, patterns most specific first, a bounded memo.

    Tools, prompts and resources share it, so one precedence rule (an exact key beats every
    pattern, then specificity; ties are load errors) governs all three.
    """

    exact: Mapping[str, Rule]
    patterns: tuple[Rule, ...]
    _lookups: dict[str, tuple[Rule | None, bool]] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Every rule: exact keys (sorted), then patterns (most specific first)."""
        return (*(self.exact[key] for key in sorted(self.exact)), *self.patterns)

    def __bool__(self) -> bool:
        return bool(self.exact) or bool(self.patterns)

    def lookup(self, name: str) -> tuple[Rule | None, bool]:
        """(governing rule, tie?) for ``name`` (a resource: its normalised URI); memoised."""
        found = self._lookups.get(name)
        if found is None:
            if len(self._lookups) >= LOOKUP_CACHE_SIZE:
                self._lookups.clear()
            found = self._lookups[name] = match_rules(self.exact, self.patterns, name)
        return found

    def find(self, key: str) -> Rule | None:
        """The rule written under ``key`` (exact resource rules are indexed by normal form)."""
        found = self.exact.get(key)
        if found is not None and found.key == key:
            return found
        return next((r for r in self.rules if r.key == key), None)


EMPTY_TABLE: Final = RuleTable(MappingProxyType({}), ())
"""A section the policy does not have (every name is unruled: hidden)."""


def match_rules(
    exact: Mapping[str, Rule], patterns: tuple[Rule, ...], name: str
) -> tuple[Rule | None, bool]:
    """(governing rule, tie?): an exact key beats every pattern, then specificity."""
    rule = exact.get(name)
    if rule is not None:
        return rule, False
    found: Rule | None = None
    found_specificity = (0, 0)
    for candidate in patterns:
        glob = candidate.glob
        if glob is None:
            continue
        if found is not None and glob.specificity != found_specificity:
            break  # sorted most specific first: nothing later can tie with the winner
        if glob.matches(name):
            if found is not None:
                return found, True
            found, found_specificity = candidate, glob.specificity
    return found, False


@dataclass(frozen=True, slots=True)
class MethodRule:
    """Extra scopes one JSON-RPC method needs besides the baseline."""

    method: str
    where: str
    scopes: tuple[str, ...]
