"""One rule of a policy file: the checks of its entry that the JSON Schema cannot express, the
:class:`~gateway.policy.rules.Rule` read from it (its ``guardrails`` checked against the
configured processors), and the table a section's rules make (split from
:mod:`gateway.policy.policy_loader`, which reads, checks and merges whole files)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any, Final

from gateway.config import parse_rate
from gateway.policy import overrides, uri, uri_patterns
from gateway.policy.condition_checks import conditions_of
from gateway.policy.glob import Glob, has_wildcard
from gateway.policy.issuers import NO_CLASSES, check_entries, entries
from gateway.policy.rules import Rule, RuleTable
from gateway.policy.ties import pattern_ties
from gateway.seams import DEFAULT_APPROVAL_TTL_S, ApprovalRule
from gateway.yaml_source import Located

__all__ = ["MAX_KEY_LENGTH", "check_rule", "index_key", "read_rule", "rule_table"]

MAX_KEY_LENGTH: Final = 256
"""Longest tool key (MCP tool names SHOULD be at most 128 characters); bounds the tie check."""


def check_rule(doc: Located, section: str, key: str, raw: Any) -> None:
    """The checks of one entry of ``section`` a schema cannot express, at their positions."""
    path = (section, key)
    noun = {"tools": "tool name", "prompts": "prompt name", "resources": "resource URI"}[section]
    if not key:
        doc.problem(path, f"a {noun} or pattern must not be empty")
    elif section == "resources":
        _pattern, reason = uri_patterns.compile_pattern(key)
        if reason is not None:
            doc.problem(path, reason)
    else:
        if len(key) > MAX_KEY_LENGTH:
            doc.problem(path, f"longer than {MAX_KEY_LENGTH} characters")
        if "[" in key or "]" in key:
            doc.problem(path, NO_CLASSES)
    if not isinstance(raw, dict):
        return
    if "scopes" not in raw and "any_of" not in raw and raw.get("deny", False) is False:
        doc.problem(path, "a rule needs scopes (use [] for the baseline only), any_of or deny")
    check_entries(doc, path, raw)
    overrides.check_override(doc, section, key, raw)
    if section != "tools" and raw.get("tasks") is True:
        doc.problem((*path, "tasks"), "tasks are a tools rule's setting (a tool call is a task)")
    if section != "tools" and "approval" in raw:
        doc.problem((*path, "approval"), "approval is a tools rule's setting (a call is approved)")
    conditions_of(doc, path, section, raw.get("when"), problems=True)


def index_key(rule: Rule) -> str:
    """The key a rule is indexed (and compared for duplicates) under: resources in normal form."""
    if rule.section != "resources":
        return rule.key
    if rule.glob is not None:
        return rule.glob.pattern
    return uri.normalize_uri(rule.key) or rule.key


def rule_table(section: str, rules: dict[str, Rule], problems: list[str]) -> RuleTable:
    """A section's rules: exact keys, patterns most specific first (ties appended to
    ``problems``)."""
    patterns = sorted(
        (rule for rule in rules.values() if rule.glob is not None),
        key=lambda rule: rule.glob.specificity if rule.glob else (0, 0),
        reverse=True,
    )
    problems.extend(pattern_ties(section, patterns))
    exact = {index: rule for index, rule in rules.items() if rule.glob is None}
    return RuleTable(MappingProxyType(exact), tuple(patterns))


def read_rule(  # noqa: PLR0917 - one call site
    doc: Located,
    section: str,
    key: str,
    body: dict[str, Any],
    configured: tuple[str, ...],
    processors: frozenset[str] | None,
) -> Rule:
    """The rule of one entry; ``processors``: the configured guardrail names (None: not
    checked)."""
    rate = parse_rate(body.get("rate_limit"))
    pattern: Glob | uri_patterns.UriPattern | None = None
    if section == "resources":
        if uri.has_uri_wildcard(key):
            pattern = uri_patterns.compile_pattern(key)[0]
    elif has_wildcard(key):
        pattern = Glob(key)
    return Rule(
        key=key,
        where=doc.where((section, key)),
        scopes=tuple(body.get("scopes", ())),
        any_of=tuple(tuple(alternative) for alternative in body.get("any_of", ())),
        clients=entries(doc, (section, key), "clients", body, configured),
        subjects=entries(doc, (section, key), "subjects", body, configured),
        deny=bool(body.get("deny", False)),
        rate_limit=(rate.count, rate.per_s) if rate else None,
        max_concurrency=body.get("max_concurrency"),
        tasks=body.get("tasks") is True,
        description=body.get("description"),
        glob=pattern,
        section=section,
        when=conditions_of(doc, (section, key), section, body.get("when"), problems=False),
        override=overrides.parse_override(doc, (section, key), body.get("override")),
        guardrails=_guardrails(doc, (section, key), body.get("guardrails", ()), processors),
        approval=_approval(body.get("approval")),
    )


def _guardrails(
    doc: Located, path: tuple[str, str], names: list[str], processors: frozenset[str] | None
) -> tuple[str, ...]:
    """A rule's ``guardrails:``, each a processor gateway.yaml configures (when known)."""
    if processors is not None:
        for index, name in enumerate(names):
            if name not in processors:
                known = ", ".join(sorted(processors)) or "none"
                doc.problem(
                    (*path, "guardrails", index),
                    f"no guardrail {name!r} in gateway.yaml's guardrails: (configured: {known})",
                )
    return tuple(names)


def _approval(raw: Any) -> ApprovalRule | None:
    """A rule's ``approval:`` (its form checked by the schema): who, how long, what is hidden."""
    if not isinstance(raw, dict):
        return None
    by = raw.get("by", "self")
    redact = tuple((raw.get("preview") or {}).get("redact", ()))
    ttl_s = int(raw.get("ttl_s", DEFAULT_APPROVAL_TTL_S))
    if isinstance(by, dict):
        return ApprovalRule(
            by="claim", claim=str(by["claim"]), value=str(by["value"]), ttl_s=ttl_s, redact=redact
        )
    return ApprovalRule(ttl_s=ttl_s, redact=redact)
