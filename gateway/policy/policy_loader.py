"""Load policy files (YAML with line numbers) into one validated :class:`PolicySet`.

Order of work, all findings collected before anything is returned:

1. expand the configured paths: a file, or a directory (its ``*.yaml`` / ``*.yml`` files that
   do not start with ``.``, sorted by name); the same file named twice is read once;
2. per file: YAML syntax and duplicate keys, the JSON Schema ``policy.schema.json`` (unknown keys
   are errors), then checks a schema cannot express (pattern syntax, empty rules, scope syntax);
3. merge: ``version``, ``baseline_scopes`` and ``listing`` must agree between the files that
   state them, and a tool, prompt or resource key, a method rule or a ``scope_hierarchy`` entry
   may be defined in one file only (resource keys compared in normal form: ``FILE:///a`` and
   ``file:///a`` are one key); each cycle in the merged ``scope_hierarchy`` is an error;
4. ties: two patterns of one section with equal specificity that can match the same name (or
   URI) are rejected, with an example.

A file with problems takes part in steps 3 and 4 with the rules and entries it got right, so a
mistake in one rule hides no cycle, duplicate or tie elsewhere (:func:`inspect_policy`).

Every finding reads ``file:line:col: key.path: message``; :func:`load_policy` raises
:class:`~gateway.errors.ConfigError` with all of them, so an operator fixes a file in one pass.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from gateway.errors import ConfigError
from gateway.policy import overrides
from gateway.policy.canonical import policy_version
from gateway.policy.conditions import TokenContexts
from gateway.policy.hierarchy import NO_HIERARCHY, ScopeHierarchy, find_cycles
from gateway.policy.policy_set import PolicySet
from gateway.policy.rule_reading import (
    MAX_KEY_LENGTH,
    check_rule,
    index_key,
    read_rule,
    rule_table,
)
from gateway.policy.rules import MethodRule, Rule
from gateway.seams import Listing
from gateway.yaml_source import Located, SchemaValidator, load_yaml

__all__ = [
    "MAX_KEY_LENGTH",
    "POLICY_SCHEMA",
    "SECTIONS",
    "SUFFIXES",
    "PolicyReport",
    "demo_sources",
    "inspect_policy",
    "load_policy",
    "policy_files",
]

POLICY_SCHEMA: Final = "policy.schema.json"
"""Packaged schema file name (``gateway/schema/``; a copy lives at ``policies/schema.json``)."""

SUFFIXES: Final = (".yaml", ".yml")
"""File name endings read from a policy directory."""

SECTIONS: Final = ("tools", "prompts", "resources")
"""The rule sections: one rule type, one ladder (:mod:`gateway.policy.evaluate`)."""

_POSITION: Final = re.compile(r":(\d+):(\d+): ")


def policy_files(paths: Sequence[Path], problems: list[str]) -> list[Path]:
    """Expand files and directories into the list of policy files to read, in order."""
    if not paths:
        problems.append("policy: at least one policy file or directory is required")
    files: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        if path.is_dir():
            try:
                found = sorted(
                    entry
                    for entry in path.iterdir()
                    if entry.suffix in SUFFIXES
                    and not entry.name.startswith(".")
                    and entry.is_file()
                )
            except OSError as exc:
                problems.append(f"{path}: cannot read directory: {type(exc).__name__}")
                continue
            if not found:
                problems.append(f"{path}: no *.yaml or *.yml policy files in this directory")
        elif path.is_file():
            found = [path]
        else:
            problems.append(f"{path}: policy path not found")
            found = []
        for file in found:
            key = file.resolve()
            if key not in seen:
                seen.add(key)
                files.append(file)
    return files


@dataclass(frozen=True, slots=True)
class PolicyReport:
    """What :func:`inspect_policy` found: every problem, and the policy set."""

    problems: tuple[str, ...]
    policy: PolicySet | None
    """Without problems, the set to serve. With problems, the set merged from what the files
    got right (for warnings that must not wait for the last fix: ``check``); never served.
    None when nothing could be merged."""


def load_policy(
    paths: Sequence[Path],
    *,
    issuers: Sequence[str] = (),
    token_contexts: TokenContexts | None = None,
    guardrails: Collection[str] | None = None,
) -> PolicySet:
    """Read, validate and merge ``paths``; raise ConfigError listing every problem.

    ``issuers``: the configured issuers' urls, in order (``Config.issuer_urls``): a plain
    ``subjects`` / ``clients`` entry applies to the first. Without them such an entry applies
    to no principal (:mod:`gateway.policy.issuers`). ``token_contexts``: the owner of the
    principals' CEL contexts the set uses (:class:`~.policy_set.PolicySet`; default: its own).
    ``guardrails``: the names of gateway.yaml's ``guardrails:`` (a rule naming another is a
    problem); None: names are not checked (the routes refuse content whose processor is not
    configured)."""
    report = inspect_policy(
        paths, issuers=issuers, token_contexts=token_contexts, guardrails=guardrails
    )
    if report.problems or report.policy is None:
        raise ConfigError(list(report.problems) or ["policy: no valid policy file"])
    return report.policy


def inspect_policy(
    paths: Sequence[Path],
    *,
    issuers: Sequence[str] = (),
    token_contexts: TokenContexts | None = None,
    guardrails: Collection[str] | None = None,
) -> PolicyReport:
    """Read, validate and merge ``paths``, reporting every problem in one pass.

    A file with problems still takes part in the checks across files (duplicates, scope
    hierarchy cycles, ties) with what it got right (:func:`_salvage`): one mistake must not
    hide another until the next run.
    """
    problems: list[str] = []
    files = policy_files(paths, problems)
    validator = SchemaValidator.packaged(POLICY_SCHEMA)
    merged: list[Located] = []
    salvaged = False
    for file in files:
        doc = load_yaml(file)
        if doc.problems:  # unreadable: nothing of it can be trusted
            problems.extend(doc.problems)
            continue
        if not isinstance(doc.value, dict):
            doc.problem((), "a policy file must be a mapping with version: 1 (docs/policy.md)")
            problems.extend(doc.problems)
            continue
        validator.check(doc)
        _check_file(doc)
        problems.extend(sorted(doc.problems, key=_position))
        salvaged = salvaged or bool(doc.problems)
        merged.append(_salvage(doc) if doc.problems else doc)
    processors = None if guardrails is None else frozenset(guardrails)
    policy = _merge(
        merged, problems, partial=salvaged, configured=tuple(issuers), processors=processors
    )
    if policy is not None and token_contexts is not None:
        policy.token_contexts = token_contexts  # before anyone has the set
    return PolicyReport(tuple(problems), policy)


_ENTRIES: Final = (*SECTIONS, "methods", "scope_hierarchy")
"""Top-level keys whose entries stand alone: a problem in one leaves out that entry only."""


def _salvage(doc: Located) -> Located:
    """``doc`` less every part a problem was found in: the entry (a rule, a method, a hierarchy
    entry) or else the whole top-level key. What is left is schema-valid."""
    value: dict[str, Any] = dict(doc.value)
    for path in doc.flawed:
        if not path:
            continue  # a problem of the file as a whole (a required key): nothing to leave out
        top = str(path[0])
        entries = value.get(top)
        if top in _ENTRIES and len(path) > 1 and isinstance(entries, dict):
            value[top] = {key: body for key, body in entries.items() if key != path[1]}
        else:
            value.pop(top, None)
    return Located(doc.file, value, doc.marks)


def demo_sources(paths: Sequence[Path]) -> tuple[str, ...]:
    """The files under ``paths`` that declare ``demo: true``, valid or not: ``check`` warns
    about them also when the set has problems (then :func:`load_policy` returns no set)."""
    found: list[str] = []
    for file in policy_files(paths, []):
        doc = load_yaml(file)
        if not doc.problems and isinstance(doc.value, dict) and doc.value.get("demo") is True:
            found.append(doc.file)
    return tuple(found)


def _check_file(doc: Located) -> None:
    """Checks the JSON Schema cannot express, with the key's own position.

    Runs even when the schema found problems (so one pass reports everything), hence the
    defensive type checks: a malformed value was already reported by the schema.
    """
    for section in SECTIONS:
        rules = doc.value.get(section)
        if isinstance(rules, dict):
            for key, raw in rules.items():
                check_rule(doc, section, key, raw)


def _position(problem: str) -> tuple[int, int]:
    """(line, column) of a ``file:line:col: ...`` finding, to report a file top to bottom."""
    match = _POSITION.search(problem)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def _merge(
    docs: list[Located],
    problems: list[str],
    *,
    partial: bool,
    configured: tuple[str, ...],
    processors: frozenset[str] | None,
) -> PolicySet | None:
    """Merge validated files; conflicts, cycles and pattern ties are appended to ``problems``.
    ``partial``: some files lost parts to their problems (a missing ``baseline_scopes`` is then
    theirs to report); ``processors``: the configured guardrail names (None: not checked)."""
    if not docs:
        return None
    baseline: tuple[str, ...] | None = None
    baseline_where = ""
    listing: Listing | None = None
    listing_where = ""
    methods: dict[str, MethodRule] = {}
    hierarchy: dict[str, tuple[str, ...]] = {}
    hierarchy_where: dict[str, str] = {}
    sections: dict[str, dict[str, Rule]] = {section: {} for section in SECTIONS}
    for doc in docs:
        raw: dict[str, Any] = doc.value
        if "baseline_scopes" in raw:
            stated = tuple(raw["baseline_scopes"])
            if baseline is None:
                baseline, baseline_where = stated, doc.where(("baseline_scopes",))
            elif set(stated) != set(baseline):
                doc.problem(
                    ("baseline_scopes",),
                    f"differs from baseline_scopes at {baseline_where}; "
                    "every file that states them must agree",
                )
        if "listing" in raw:
            if listing is None:
                listing, listing_where = raw["listing"], doc.where(("listing",))
            elif raw["listing"] != listing:
                doc.problem(
                    ("listing",),
                    f"differs from listing at {listing_where}; "
                    "every file that states it must agree",
                )
        for method, body in raw.get("methods", {}).items():
            if method in methods:
                doc.problem(("methods", method), f"also defined at {methods[method].where}")
                continue
            where = doc.where(("methods", method))
            methods[method] = MethodRule(method, where, tuple(body["scopes"]))
        for scope, implied in raw.get("scope_hierarchy", {}).items():
            if scope in hierarchy:
                doc.problem(("scope_hierarchy", scope), f"also defined at {hierarchy_where[scope]}")
                continue
            hierarchy[scope] = tuple(implied)
            hierarchy_where[scope] = doc.where(("scope_hierarchy", scope))
        for section, rules in sections.items():
            for key, body in raw.get(section, {}).items():
                rule = read_rule(doc, section, key, body, configured, processors)
                index = index_key(rule)
                if index in rules:
                    doc.problem((section, key), f"also defined at {rules[index].where}")
                    continue
                rules[index] = rule
        problems.extend(doc.problems)
        doc.problems.clear()
    if baseline is None and not partial:
        problems.append(
            f"{docs[0].file}:1:1: baseline_scopes: required (in at least one policy file)"
        )
    for cycle in find_cycles(hierarchy):
        problems.append(
            f"{hierarchy_where[cycle[0]]}: scope_hierarchy.{cycle[0]}: is part of a cycle "
            f"({' -> '.join(cycle)}); a scope hierarchy must not lead back to a scope"
        )
    baseline = baseline or ()
    tables = {section: rule_table(section, rules, problems) for section, rules in sections.items()}
    known = set(baseline)
    for scope, implied in hierarchy.items():
        known.add(scope)
        known.update(implied)
    for method_rule in methods.values():
        known.update(method_rule.scopes)
    for rules in sections.values():
        for rule in rules.values():
            known.update(rule.scopes)
            for alternative in rule.any_of:
                known.update(alternative)
    tools = tables["tools"]
    return PolicySet(
        version=policy_version(baseline, methods, sections, listing or "allowed", hierarchy),
        baseline_scopes=baseline,
        listing=listing or "allowed",
        exact=tools.exact,
        globs=tools.patterns,
        methods=MappingProxyType(methods),
        sources=tuple(doc.file for doc in docs),
        demo_sources=tuple(doc.file for doc in docs if doc.value.get("demo") is True),
        known_scopes=frozenset(known),
        prompts=tables["prompts"],
        resources=tables["resources"],
        hierarchy=ScopeHierarchy(hierarchy) if hierarchy else NO_HIERARCHY,
        aliases=MappingProxyType(overrides.rename_aliases(tools.exact, problems)),
        issuers=configured,
    )
