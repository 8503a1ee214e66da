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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from gateway.config import parse_rate
from gateway.errors import ConfigError
from gateway.policy import overrides, uri
from gateway.policy.canonical import policy_version
from gateway.policy.condition_checks import conditions_of
from gateway.policy.conditions import TokenContexts
from gateway.policy.glob import Glob, has_wildcard
from gateway.policy.hierarchy import NO_HIERARCHY, ScopeHierarchy, find_cycles
from gateway.policy.issuers import NO_CLASSES, check_entries, entries
from gateway.policy.policy_set import PolicySet
from gateway.policy.rules import MethodRule, Rule, RuleTable
from gateway.policy.ties import pattern_ties
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

MAX_KEY_LENGTH: Final = 256
"""Longest tool key (MCP tool names SHOULD be at most 128 characters); bounds the tie check."""

SECTIONS: Final = ("tools", "prompts", "resources")
"""The rule sections: one rule type, one ladder (:mod:`gateway.policy.evaluate`)."""

_NO_CLASSES: Final = NO_CLASSES
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
) -> PolicySet:
    """Read, validate and merge ``paths``; raise ConfigError listing every problem.

    ``issuers``: the configured issuers' urls, in order (``Config.issuer_urls``): a plain
    ``subjects`` / ``clients`` entry applies to the first. Without them such an entry applies
    to no principal (:mod:`gateway.policy.issuers`). ``token_contexts``: the owner of the
    principals' CEL contexts the set uses (:class:`~.policy_set.PolicySet`; default: its own)."""
    report = inspect_policy(paths, issuers=issuers, token_contexts=token_contexts)
    if report.problems or report.policy is None:
        raise ConfigError(list(report.problems) or ["policy: no valid policy file"])
    return report.policy


def inspect_policy(
    paths: Sequence[Path],
    *,
    issuers: Sequence[str] = (),
    token_contexts: TokenContexts | None = None,
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
    policy = _merge(merged, problems, partial=salvaged, configured=tuple(issuers))
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
                _check_rule(doc, section, key, raw)


def _check_rule(doc: Located, section: str, key: str, raw: Any) -> None:
    path = (section, key)
    noun = {"tools": "tool name", "prompts": "prompt name", "resources": "resource URI"}[section]
    if not key:
        doc.problem(path, f"a {noun} or pattern must not be empty")
    elif section == "resources":
        _pattern, reason = uri.compile_pattern(key)
        if reason is not None:
            doc.problem(path, reason)
    else:
        if len(key) > MAX_KEY_LENGTH:
            doc.problem(path, f"longer than {MAX_KEY_LENGTH} characters")
        if "[" in key or "]" in key:
            doc.problem(path, _NO_CLASSES)
    if not isinstance(raw, dict):
        return
    if "scopes" not in raw and "any_of" not in raw and raw.get("deny", False) is False:
        doc.problem(path, "a rule needs scopes (use [] for the baseline only), any_of or deny")
    check_entries(doc, path, raw)
    overrides.check_override(doc, section, key, raw)
    if section != "tools" and raw.get("tasks") is True:
        doc.problem((*path, "tasks"), "tasks are a tools rule's setting (a tool call is a task)")
    conditions_of(doc, path, section, raw.get("when"), problems=True)


def _position(problem: str) -> tuple[int, int]:
    """(line, column) of a ``file:line:col: ...`` finding, to report a file top to bottom."""
    match = _POSITION.search(problem)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def _merge(
    docs: list[Located], problems: list[str], *, partial: bool, configured: tuple[str, ...]
) -> PolicySet | None:
    """Merge validated files; conflicts, cycles and pattern ties are appended to ``problems``.
    ``partial``: some files lost parts to their problems (a missing ``baseline_scopes`` is then
    theirs to report)."""
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
                rule = _rule(doc, section, key, body, configured)
                index = _index_key(rule)
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
    tables = {section: _table(section, rules, problems) for section, rules in sections.items()}
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


def _index_key(rule: Rule) -> str:
    """The key a rule is indexed (and compared for duplicates) under: resources in normal form."""
    if rule.section != "resources":
        return rule.key
    if rule.glob is not None:
        return rule.glob.pattern
    return uri.normalize_uri(rule.key) or rule.key


def _table(section: str, rules: dict[str, Rule], problems: list[str]) -> RuleTable:
    patterns = sorted(
        (rule for rule in rules.values() if rule.glob is not None),
        key=lambda rule: rule.glob.specificity if rule.glob else (0, 0),
        reverse=True,
    )
    problems.extend(pattern_ties(section, patterns))
    exact = {index: rule for index, rule in rules.items() if rule.glob is None}
    return RuleTable(MappingProxyType(exact), tuple(patterns))


def _rule(
    doc: Located, section: str, key: str, body: dict[str, Any], configured: tuple[str, ...]
) -> Rule:
    rate = parse_rate(body.get("rate_limit"))
    pattern: Glob | uri.UriPattern | None = None
    if section == "resources":
        if uri.has_uri_wildcard(key):
            pattern = uri.compile_pattern(key)[0]
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
    )
