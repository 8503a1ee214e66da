"""What ``check`` prints and startup logs about a policy set that loaded (docs/policy.md).

Rules no configured backend can ever match, renames into another backend's prefix, and
``subjects``/``clients`` entries whose issuer is ambiguous or not configured
(:func:`policy_warnings`); once the catalogs are known, rules that govern none of their tools and
tools no rule governs (:func:`unmatched_rules`, :func:`unruled_tools`, also in ``policy
explain``). Warnings only: each such rule or entry grants less than it seems to, never more.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Final

from gateway.policy.glob import WILDCARDS, overlap
from gateway.policy.issuers import NAME
from gateway.policy.overrides import rename_warnings
from gateway.policy.policy_set import PolicySet
from gateway.policy.rules import Rule
from gateway.seams import TOOL_NAME

__all__ = [
    "issuer_warnings",
    "policy_warnings",
    "unmatched_rules",
    "unreachable_rules",
    "unruled_tools",
]

_LONGEST: Final = 64
"""The longest tool name (:data:`gateway.seams.TOOL_NAME`)."""


def policy_warnings(policy: PolicySet, prefixes: Collection[str] | None) -> list[tuple[str, str]]:
    """(log event, text) of each warning. ``prefixes``: the configured backends' name prefixes;
    None when the configuration could not say (then only the issuers' entries are checked)."""
    found: list[tuple[str, str]] = []
    if prefixes is not None:
        found += [("policy.rule_unreachable", text) for text in unreachable_rules(policy, prefixes)]
        found += [("policy.rename_ambiguous", text) for text in rename_warnings(policy, prefixes)]
    found += [("policy.entry_issuer", text) for text in issuer_warnings(policy)]
    return found


def unmatched_rules(policy: PolicySet, tool_names: Iterable[str]) -> list[str]:
    """Warnings for rules that govern no tool of the backend catalog.

    A pattern whose every matching tool is taken by an exact rule or a more specific pattern
    is reported too: it has no effect on this catalog.
    """
    names = sorted(set(tool_names))
    governed = {rule.key for name in names if (rule := policy.rule_for(name)) is not None}
    warnings = []
    for rule in policy.rules:
        if rule.key in governed:
            continue
        if rule.glob is not None and any(rule.glob.matches(name) for name in names):
            message = "every tool this pattern matches is governed by a more specific rule"
        else:
            message = "rule matches no tool in the backend catalog"
        warnings.append(f"{rule.where}: tools.{rule.key}: {message}")
    return warnings


def unreachable_rules(policy: PolicySet, prefixes: Collection[str]) -> list[str]:
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
    for rule in (*policy.rules, *policy.prompts.rules):
        message = _unreachable(rule, spaces)
        if message is not None:
            found.append(
                (_position(rule.where), f"{rule.where}: {rule.section}.{rule.key}: {message}")
            )
    return [warning for _, warning in sorted(found)]


def unruled_tools(policy: PolicySet, tool_names: Iterable[str]) -> list[str]:
    """Catalog tools no rule governs: denied and hidden from ``tools/list``."""
    return sorted({name for name in tool_names if policy.rule_for(name) is None})


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


def issuer_warnings(policy: PolicySet) -> list[str]:
    """``check``'s and startup's findings about whose names the rules' entries are:

    - with several configured issuers, a rule with plain entries: they apply to the first
      issuer only, which the rule's author may not have meant (qualify them to say whose);
    - an entry naming an issuer that is not configured: it applies to no principal (a typo, or
      an issuer not configured yet)."""
    issuers = policy.issuers
    found: list[tuple[str, str]] = []
    for rule in _rules(policy):
        plain: list[str] = []
        for kind, listed in (("clients", rule.clients), ("subjects", rule.subjects)):
            for entry in listed or ():
                if entry.written is None:
                    plain.append(f"{NAME[kind]} {entry.value!r}")
                elif issuers and entry.written not in issuers:
                    unknown = (
                        f"{entry.where}: {rule.section}.{rule.key}.{kind}: issuer "
                        f"{entry.written} is not configured{_near(entry.written, issuers)}: "
                        f"{entry.value!r} applies to no caller"
                    )
                    found.append((entry.where, unknown))
        if plain and len(issuers) > 1:
            whose = "subject" if plain[0].startswith("subject") else "client"
            first_only = (
                f"{rule.where}: {rule.section}.{rule.key}: {', '.join(plain)} name no issuer, "
                f"so they apply to the first issuer only ({issuers[0]}) of the "
                f"{len(issuers)} configured; write {{issuer: <url>, {whose}: ...}} to say whose"
            )
            found.append((rule.where, first_only))
    return [warning for _, warning in sorted(found, key=lambda pair: _position(pair[0]))]


def _near(written: str, issuers: Sequence[str]) -> str:
    """A configured url the written one differs from only by a trailing slash or case."""
    loose = written.rstrip("/").lower()
    same = [url for url in issuers if url.rstrip("/").lower() == loose]
    return f" (did you mean {same[0]}? issuers are compared exactly)" if same else ""


def _rules(policy: PolicySet) -> Iterable[Rule]:
    return (*policy.rules, *policy.prompts.rules, *policy.resources.rules)
