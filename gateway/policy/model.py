"""The loaded policy: immutable rules and the :class:`PolicySet` that implements ``seams.Policy``.

A :class:`PolicySet` is built only by :func:`gateway.policy.loader.load_policy`, after the whole
set of files was validated; it never changes afterwards, so a request keeps using the object it
took from the :class:`~gateway.seams.PolicySource` even while a reload swaps in a new one.
Decisions are made by the pure functions in :mod:`gateway.policy.evaluate`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from gateway.policy import evaluate
from gateway.policy.conditions import Condition
from gateway.policy.glob import WILDCARDS, Glob, overlap
from gateway.policy.hierarchy import NO_HIERARCHY, ScopeHierarchy
from gateway.policy.issuers import Entry
from gateway.policy.uri import UriPattern, resource_uri
from gateway.seams import TOOL_NAME, Decision, Listing, Principal, ToolOverride

__all__ = ["EMPTY_TABLE", "LOOKUP_CACHE_SIZE", "MethodRule", "PolicySet", "Rule", "RuleTable"]

LOOKUP_CACHE_SIZE: Final = 4096
"""Memoised name -> rule lookups per policy set; the memo starts over when full."""
_MISSING: Final = object()
_LONGEST: Final = 64
"""The longest tool name (:data:`gateway.seams.TOOL_NAME`)."""


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


@dataclass(slots=True, eq=False)
class PolicySet:
    """One merged, validated policy set. Implements :class:`gateway.seams.Policy`.

    Never mutated after :func:`~gateway.policy.loader.load_policy` built it (it is not a frozen
    dataclass only because ``seams.Policy`` declares ``version`` as a plain attribute, which a
    read-only field does not satisfy for mypy). ``version`` is a content hash of the canonical
    form: formatting, comments, the order of mapping keys and the split into files do not change
    it; any change of meaning (list order included: it orders challenges) does.
    """

    version: str
    baseline_scopes: tuple[str, ...]
    exact: Mapping[str, Rule]
    globs: tuple[Rule, ...]
    """Pattern rules, most specific first (ties were rejected at load time)."""
    methods: Mapping[str, MethodRule]
    sources: tuple[str, ...] = ()
    """The policy files this set was built from, in load order."""
    demo_sources: tuple[str, ...] = ()
    """Files of the set that declare ``demo: true`` (``check`` and ``serve`` warn about them)."""
    listing: Listing = "allowed"
    """``tools/list``: only callable tools (``allowed``), or also step-up ones (``step_up``)."""
    known_scopes: frozenset[str] = frozenset()
    """Every scope the policy mentions. RFC 6750 §3.1 / MCP 2025-11-25 step-up: a challenge may
    carry the caller's already granted scopes that the policy recognises, so clients that replace
    their scope set do not lose grants."""
    prompts: RuleTable = EMPTY_TABLE
    """``prompts:`` rules, keyed by prompt name or pattern (the tool pattern language)."""
    resources: RuleTable = EMPTY_TABLE
    """``resources:`` rules, keyed by URI or URI pattern (:mod:`gateway.policy.uri`)."""
    hierarchy: ScopeHierarchy = NO_HIERARCHY
    """``scope_hierarchy:``: which granted scopes imply which others (:mod:`.hierarchy`)."""
    aliases: Mapping[str, Rule] = field(default_factory=lambda: MappingProxyType({}))
    """Renamed tool name -> the exact rule whose ``override.rename`` exposes a tool under it:
    that rule governs the new name (:func:`.overrides.rename_aliases`)."""
    issuers: tuple[str, ...] = ()
    """The configured issuers' urls the set was loaded for, in order: a plain ``subjects`` or
    ``clients`` entry applies to the first (:mod:`.issuers`); empty: to no principal."""
    _lookups: dict[str, tuple[Rule | None, bool]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _templates: dict[str, tuple[Rule, ...] | None] = field(
        default_factory=dict, repr=False, compare=False
    )

    # --- seams.Policy ---------------------------------------------------------------------------

    def decide_tool(self, principal: Principal, tool: str) -> Decision:
        return evaluate.evaluate_tool(self, principal, tool)

    def decide_method(self, principal: Principal, method: str) -> Decision:
        return evaluate.evaluate_method(self, principal, method)

    def decide_conditions(
        self,
        principal: Principal,
        name: str,
        arguments: Mapping[str, Any] | None,
        *,
        section: str = "tools",
        backend: str = "",
        client_ip: str = "",
    ) -> Decision | None:
        return evaluate.evaluate_conditions(
            self, principal, name, arguments,
            section=section, backend=backend, client_ip=client_ip,
        )  # fmt: skip

    def decide_prompt(self, principal: Principal, prompt: str) -> Decision:
        return evaluate.evaluate_prompt(self, principal, prompt)

    def resource_uri(self, uri: str) -> str | None:
        return resource_uri(uri)

    def decide_resource(self, principal: Principal, uri: str) -> Decision:
        return evaluate.evaluate_resource(self, principal, uri)

    def decide_template(self, principal: Principal, uri_template: str) -> Decision:
        return evaluate.evaluate_template(self, principal, uri_template)

    def template_rules(self, uri_template: str) -> tuple[Rule, ...] | None:
        """The ``resources:`` rules that can match some expansion of ``uri_template`` (None: not
        a template the gateway can read); memoised, bounded like the name lookups."""
        found = self._templates.get(uri_template, _MISSING)
        if found is _MISSING:
            if len(self._templates) >= LOOKUP_CACHE_SIZE:
                self._templates.clear()
            found = self._templates[uri_template] = evaluate.reachable_rules(
                self.resources, uri_template
            )
        return found  # type: ignore[return-value]

    def limits(
        self, section: str, rule_key: str | None
    ) -> tuple[tuple[int, float] | None, int | None]:
        """(rate_limit, max_concurrency) of the ``prompts``/``resources`` rule ``rule_key``."""
        table = self.prompts if section == "prompts" else self.resources
        rule = table.find(rule_key) if rule_key is not None else None
        if rule is None or rule.deny:
            return None, None
        return rule.rate_limit, rule.max_concurrency

    def rate_limit(self, tool: str) -> tuple[int, float] | None:
        rule = self.rule_for(tool)
        return None if rule is None or rule.deny else rule.rate_limit

    def max_concurrency(self, tool: str) -> int | None:
        rule = self.rule_for(tool)
        return None if rule is None or rule.deny else rule.max_concurrency

    def allows_tasks(self, tool: str) -> bool:
        rule = self.rule_for(tool)
        return rule is not None and not rule.deny and rule.tasks

    # --- lookups --------------------------------------------------------------------------------

    @property
    def rules(self) -> tuple[Rule, ...]:
        """Every rule: exact names (sorted), then patterns (most specific first)."""
        return (*(self.exact[key] for key in sorted(self.exact)), *self.globs)

    def rule_for(self, tool: str) -> Rule | None:
        """The rule that governs ``tool``: its exact rule, else the most specific pattern.

        None when no rule matches, and also on a tie (fail closed; ties are rejected at load).
        """
        rule, tied = self.lookup(tool)
        return None if tied else rule

    def lookup(self, tool: str) -> tuple[Rule | None, bool]:
        """(governing rule, tie?) -- an exact name beats every pattern, then specificity.

        Memoised (the set never changes); the memo is bounded because names in ``tools/call``
        come from clients.
        """
        found = self._lookups.get(tool)
        if found is None:
            if len(self._lookups) >= LOOKUP_CACHE_SIZE:
                self._lookups.clear()
            found = self._lookups[tool] = self._match(tool)
        return found

    def _match(self, tool: str) -> tuple[Rule | None, bool]:
        renamed = self.aliases.get(tool)
        if renamed is not None:  # the rule that renamed a tool governs its new name
            return renamed, False
        return match_rules(self.exact, self.globs, tool)

    def override_for(self, tool: str) -> ToolOverride | None:
        """The ``override:`` of the rule governing the backend tool exposed (before any rename)
        as ``tool``: its exact rule, else the most specific pattern; None on a tie (such a tool
        is hidden anyway). Renamed names are not consulted: they are what an override makes."""
        rule, tied = match_rules(self.exact, self.globs, tool)
        return rule.override if rule is not None and not tied else None

    def decide_rule(self, principal: Principal, key: str, section: str = "tools") -> Decision:
        """Evaluate one rule by its key, as if a name it governs were used (``explain``)."""
        if section == "tools":
            rule = self.exact.get(key) or next((r for r in self.globs if r.key == key), None)
        else:
            rule = (self.prompts if section == "prompts" else self.resources).find(key)
        if rule is None:
            return evaluate.HIDDEN_NO_RULE
        return evaluate.evaluate_rule(self.baseline_scopes, rule, principal, self.hierarchy)

    # --- catalog cross-checks (startup and ``check``) -------------------------------------------

    def unmatched_rules(self, tool_names: Iterable[str]) -> list[str]:
        """Warnings for rules that govern no tool of the backend catalog.

        A pattern whose every matching tool is taken by an exact rule or a more specific pattern
        is reported too: it has no effect on this catalog.
        """
        names = sorted(set(tool_names))
        governed = {rule.key for name in names if (rule := self.rule_for(name)) is not None}
        warnings = []
        for rule in self.rules:
            if rule.key in governed:
                continue
            if rule.glob is not None and any(rule.glob.matches(name) for name in names):
                message = "every tool this pattern matches is governed by a more specific rule"
            else:
                message = "rule matches no tool in the backend catalog"
            warnings.append(f"{rule.where}: tools.{rule.key}: {message}")
        return warnings

    def unreachable_rules(self, prefixes: Collection[str]) -> list[str]:
        """Warnings for tool and prompt rules that can never match, whatever the catalogs hold.

        ``prefixes`` are the configured backends' name prefixes: every advertised tool and
        prompt name starts with one of them. A rule is unreachable when the names it matches
        lie outside every prefix (``wiki__search`` with no ``wiki__`` backend; the empty prefix
        of an unprefixed backend takes any name), exactly (:func:`~gateway.policy.glob.overlap`);
        a tool rule also when it needs a character or a length no tool name has
        (:data:`~gateway.seams.TOOL_NAME`). Only ever a warning: such a rule grants nothing,
        and the backend it names may be on its way into the configuration.
        """
        spaces = sorted(prefixes)
        found = []
        for rule in (*self.rules, *self.prompts.rules):
            message = _unreachable(rule, spaces)
            if message is not None:
                found.append(
                    (_position(rule.where), f"{rule.where}: {rule.section}.{rule.key}: {message}")
                )
        return [warning for _, warning in sorted(found)]

    def unruled_tools(self, tool_names: Iterable[str]) -> list[str]:
        """Catalog tools no rule governs: denied and hidden from ``tools/list``."""
        return sorted({name for name in tool_names if self.rule_for(name) is None})


def _unreachable(rule: Rule, prefixes: list[str]) -> str | None:
    if rule.section == "tools":
        literals = [char for char in rule.key if char not in WILDCARDS]
        shortest = len(rule.key) - rule.key.count("*")
        if shortest > _LONGEST or any(not TOOL_NAME.fullmatch(char) for char in literals):
            return f"can never match: tool names are 1-{_LONGEST} characters of [A-Za-z0-9_.-]"
    if any(overlap(rule.key, prefix + "*") is not None for prefix in prefixes):
        return None
    shown = ", ".join(repr(prefix) for prefix in prefixes) or "none"
    return f"can never match: no configured backend advertises such a name (prefixes: {shown})"


def _position(where: str) -> tuple[str, int, int]:
    """``file:line:col`` as a sort key (file order, then top to bottom)."""
    file, line, column = where.rsplit(":", 2)
    return file, int(line), int(column)
