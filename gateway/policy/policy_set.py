"""The loaded policy: the :class:`PolicySet` that implements ``seams.Policy``.

A :class:`PolicySet` is built only by :func:`gateway.policy.policy_loader.load_policy`, after the
whole set of files was validated; it never changes afterwards, so a request keeps using the object
it took from the :class:`~gateway.seams.PolicySource` even while a reload swaps in a new one. Its
``decide_*`` methods are the one way to ask it: they find the rule that governs a name (steps 1 and
2 of the ladder) and let :func:`gateway.policy.evaluate.evaluate_rule` decide the rest; the rules
themselves are :mod:`gateway.policy.rules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from gateway.policy.conditions import (
    TOKEN_CONTEXTS,
    ArgumentsTooLarge,
    ConditionFailed,
    TokenContexts,
    call_values,
    conditions_hold,
    token_context,
)
from gateway.policy.evaluate import (
    DISCOVER_ALIASES,
    HIDDEN_ERROR,
    HIDDEN_NO_RULE,
    evaluate_rule,
    evaluate_scopes,
    reachable_rules,
    union,
)
from gateway.policy.hierarchy import NO_HIERARCHY, ScopeHierarchy
from gateway.policy.rules import (
    EMPTY_TABLE,
    LOOKUP_CACHE_SIZE,
    MethodRule,
    Rule,
    RuleTable,
    match_rules,
)
from gateway.policy.uri import normalize_uri, resource_uri
from gateway.seams import SECTIONS, AccessQuestion, Decision, Listing, Principal, ToolOverride

__all__ = ["PolicySet"]

_MISSING: Final = object()


@dataclass(slots=True, eq=False)
class PolicySet:
    """One merged, validated policy set. Implements :class:`gateway.seams.Policy`.

    Never mutated after :func:`~gateway.policy.policy_loader.load_policy` built it (it is not a
    frozen dataclass only because ``seams.Policy`` declares ``version`` as a plain attribute, which
    a read-only field does not satisfy for mypy). ``version`` is a content hash of the canonical
    form: formatting, comments, the order of mapping keys and the split into files do not change it;
    any change of meaning (list order included: it orders challenges) does.
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
    token_contexts: TokenContexts = field(
        default_factory=lambda: TokenContexts(TOKEN_CONTEXTS), repr=False, compare=False
    )
    """The principals' CEL contexts (:mod:`.conditions`): not the set's content, its owner is
    the gateway's (a reload hands the same one to the new set); a set loaded alone (``policy
    explain``, tests) has its own."""
    _lookups: dict[str, tuple[Rule | None, bool]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _templates: dict[str, tuple[Rule, ...] | None] = field(
        default_factory=dict, repr=False, compare=False
    )

    # --- seams.Policy: the ladder's steps 1 and 2 here, 3 to 7 in :mod:`.evaluate` -----------

    def decide_tool(self, principal: Principal, tool: str) -> Decision:
        """Whether ``principal`` may call ``tool`` (and whether it may know the tool)."""
        try:
            return self._decide(self.lookup(tool), principal)
        except Exception:  # SECURITY: an evaluation error denies (fail closed)
            return HIDDEN_ERROR

    def decide_method(self, principal: Principal, method: str) -> Decision:
        """Baseline plus the method's extra scopes (``methods:``); other methods need the
        baseline."""
        try:
            key = DISCOVER_ALIASES.get(method, method)
            method_rule = self.methods.get(key)
            needed = union(self.baseline_scopes, method_rule.scopes if method_rule else ())
            return evaluate_scopes(needed, key if method_rule else None, principal, self.hierarchy)
        except Exception:  # SECURITY: an evaluation error denies (fail closed)
            return HIDDEN_ERROR

    def decide_conditions(
        self, principal: Principal, question: AccessQuestion, client_ip: str = ""
    ) -> Decision | None:
        """After the ladder allowed ``question.target``: its rule's ``when:`` conditions (all
        must hold).

        A condition that is false refuses with ``condition``; one that cannot be evaluated (a
        missing key without ``has()``, a non-boolean result) with ``condition_error``: both are
        visible refusals without step-up (more scopes would not help). Never an allow on error.
        Arguments the conditions read that are over their bound refuse with
        ``arguments_too_large`` before any condition runs. ``question.arguments=None`` is a
        listing (``tools/list``, ``prompts/list``): only the conditions that do not read
        ``arguments`` are decided there, the others wait for the call.
        """
        rule: Rule | None = None
        try:
            section, name = SECTIONS[question.action], question.target
            if section == "resources":
                # The condition reads the URI the rule was decided on (a listing passes the
                # backend's spelling): its normal form; one with none has no rule.
                normalized = normalize_uri(name)
                if normalized is None:
                    return None
                name = normalized
            rule = self._governing(section, name)
            if rule is None or not rule.when:
                return None
            conditions, arguments = rule.when, question.arguments
            if arguments is None:
                listable = tuple(c for c in conditions if c.listable)
                if not listable:
                    return None
                if len(listable) < len(conditions):
                    conditions = listable  # else the rule's own tuple: its plan is kept
            backend = question.backend or ""
            call = call_values(
                conditions, section, name, arguments, backend=backend, client_ip=client_ip
            )
            token = self.token_contexts.of(principal, token_context)
            if conditions_hold(conditions, token, call) is None:
                return None
            return Decision(allowed=False, visible=True, rule=rule.key, reason="condition")
        except ArgumentsTooLarge:
            return _refused(rule, "arguments_too_large")
        except ConditionFailed as exc:
            return _refused(rule, "condition_error", str(exc))
        except Exception as exc:  # SECURITY: an evaluation error denies (fail closed)
            return _refused(rule, "condition_error", type(exc).__name__)

    def decide_prompt(self, principal: Principal, prompt: str) -> Decision:
        """``prompts:`` rules (the tool ladder); a hidden prompt is answered as an unknown one."""
        try:
            return self._decide(self.prompts.lookup(prompt), principal)
        except Exception:  # SECURITY: an evaluation error denies (fail closed)
            return HIDDEN_ERROR

    def resource_uri(self, uri: str) -> str | None:
        return resource_uri(uri)

    def decide_resource(self, principal: Principal, uri: str) -> Decision:
        """``resources:`` rules on the URI's normal form (one with none has no rule)."""
        try:
            normalized = normalize_uri(uri)
            if normalized is None:
                return HIDDEN_NO_RULE
            return self._decide(self.resources.lookup(normalized), principal)
        except Exception:  # SECURITY: an evaluation error denies (fail closed)
            return HIDDEN_ERROR

    def decide_template(self, principal: Principal, uri_template: str) -> Decision:
        """Whether a resource template is shown (``resources/templates/list``) and completed.

        The template's expansions are approximated by a pattern (a superset:
        :func:`.uri_patterns.template_pattern`); the decision is the best one among the rules
        that can match one of them: allowed if one allows, else step-up if one would with more
        scopes, else hidden. A read
        of an expansion is decided on its own URI (:meth:`decide_resource`), so a template shown
        here can still expand to URIs that are refused.
        """
        try:
            reachable = self.template_rules(uri_template)
            if reachable is None:
                return HIDDEN_NO_RULE
            best: Decision | None = None
            for rule in reachable:
                decision = evaluate_rule(self.baseline_scopes, rule, principal, self.hierarchy)
                if decision.allowed:
                    return decision
                if decision.visible and best is None:
                    best = decision
            return best if best is not None else HIDDEN_NO_RULE
        except Exception:  # SECURITY: an evaluation error denies (fail closed)
            return HIDDEN_ERROR

    def _decide(self, found: tuple[Rule | None, bool], principal: Principal) -> Decision:
        """The ladder on the rule a lookup found (tools, prompts, resources alike)."""
        rule, tied = found
        if tied:
            # Unreachable after load-time checks; if it ever happens, nobody wins the tie.
            key = rule.key if rule else None
            return Decision(allowed=False, visible=False, rule=key, reason="tie")
        if rule is None:
            # Default deny: a name without a rule does not exist for any caller.
            return HIDDEN_NO_RULE
        return evaluate_rule(self.baseline_scopes, rule, principal, self.hierarchy)

    def _governing(self, section: str, name: str) -> Rule | None:
        """The rule that governs ``name`` in ``section`` (None: none, or a tie)."""
        if section == "tools":
            return self.rule_for(name)
        if section == "prompts":
            rule, tied = self.prompts.lookup(name)
        else:
            normalized = normalize_uri(name)
            if normalized is None:
                return None
            rule, tied = self.resources.lookup(normalized)
        return None if tied else rule

    def template_rules(self, uri_template: str) -> tuple[Rule, ...] | None:
        """The ``resources:`` rules that can match some expansion of ``uri_template`` (None: not
        a template the gateway can read); memoised, bounded like the name lookups."""
        found = self._templates.get(uri_template, _MISSING)
        if found is _MISSING:
            if len(self._templates) >= LOOKUP_CACHE_SIZE:
                self._templates.clear()
            found = self._templates[uri_template] = reachable_rules(self.resources, uri_template)
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
            return HIDDEN_NO_RULE
        return evaluate_rule(self.baseline_scopes, rule, principal, self.hierarchy)


def _refused(rule: Rule | None, reason: str, detail: str = "") -> Decision:
    """A ``when:`` refusal: visible, no step-up (more scopes would not help)."""
    key = rule.key if rule else None
    return Decision(allowed=False, visible=True, rule=key, reason=reason, detail=detail)
