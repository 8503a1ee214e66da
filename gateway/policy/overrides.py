"""``override:`` on a tools rule: how the gateway exposes the tools the rule governs.

Parsing and the checks a file alone can answer (the JSON Schema did the shapes; ``docs/policy.md
#overrides`` is the reference). Every finding is ``file:line:col: key.path: message``:

* only in ``tools:`` (prompts and resources have no override yet);
* ``rename`` needs an exact tool key (a pattern would give many tools one name), must differ
  from the key, and no other rule may claim the new name: neither another exact key nor another
  ``rename`` (checked across the whole set, :func:`rename_aliases`);
* an argument cannot be both ``fixed`` and ``hidden``; a fixed value must be plain JSON.

What needs the backend's schema (is the property there, is a hidden one optional, does a fixed
value pass the property's schema) is only knowable once the backend listed the tool: the
federation checks it when it merges the catalogs (:mod:`gateway.backend.catalog.exposed`) and hides
a tool whose override does not fit, logging ``tool_override_refused``.

A renamed tool is governed by the rule that renamed it: :func:`rename_aliases` maps the new name
to that rule, and the policy looks the name up there first (:meth:`PolicySet.lookup`), so scopes,
``rate_limit``, ``max_concurrency``, ``when:`` and the audit trail all name the exposed tool.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any

from gateway.jsonkit.read import JsonError
from gateway.jsonkit.write import plain_copy
from gateway.policy.glob import has_wildcard
from gateway.policy.policy_set import PolicySet
from gateway.policy.rules import Rule
from gateway.seams import ToolOverride
from gateway.yaml_source import Located

__all__ = [
    "canonical_override",
    "check_override",
    "describe_override",
    "explain_overrides",
    "override_lines",
    "parse_override",
    "rename_aliases",
    "rename_warnings",
]


def check_override(doc: Located, section: str, key: str, rule: Mapping[str, Any]) -> None:
    """Report what the schema cannot say about ``rule``'s ``override:`` (see the docstring)."""
    raw = rule.get("override")
    if not isinstance(raw, dict):
        return
    path = (section, key, "override")
    if section != "tools":
        doc.problem(path, "overrides are supported on tools rules only (not yet here)")
        return
    if "rename" in raw and has_wildcard(key):
        doc.problem((*path, "rename"), "rename needs an exact tool name, not a pattern")
    elif raw.get("rename") == key:
        doc.problem((*path, "rename"), "renames the tool to the name it already has")
    arguments = raw.get("arguments")
    if not isinstance(arguments, dict):
        return
    fixed = arguments.get("fixed")
    hidden = arguments.get("hidden")
    if isinstance(fixed, dict):
        for name, value in fixed.items():
            if not _plain_json(value):
                doc.problem((*path, "arguments", "fixed", name), "must be a plain JSON value")
    if isinstance(fixed, dict) and isinstance(hidden, list):
        for index, name in enumerate(hidden):
            if name in fixed:
                doc.problem(
                    (*path, "arguments", "hidden", index),
                    f"{name!r} is also fixed: an argument is either fixed or hidden",
                )


def _plain_json(value: Any) -> bool:
    try:
        plain_copy(value)
    except JsonError:
        return False
    return True


def parse_override(doc: Located, path: tuple[str, str], raw: Any) -> ToolOverride | None:
    """The :class:`ToolOverride` of a validated rule body's ``override:`` (None: none)."""
    if not isinstance(raw, dict):
        return None
    arguments = raw.get("arguments") or {}
    annotations = raw.get("annotations") or {}
    fixed = arguments.get("fixed") or {}
    return ToolOverride(
        where=doc.where((*path, "override")),
        title=raw.get("title"),
        description=raw.get("description"),
        annotations=MappingProxyType(dict(annotations)),
        rename=raw.get("rename"),
        fixed=MappingProxyType(plain_copy(fixed)),
        hidden=tuple(arguments.get("hidden") or ()),
    )


def rename_aliases(exact: Mapping[str, Rule], problems: list[str]) -> dict[str, Rule]:
    """new name -> the exact tools rule that renames a tool to it; conflicts to ``problems``."""
    aliases: dict[str, Rule] = {}
    for key in sorted(exact):
        rule = exact[key]
        override = rule.override
        if override is None or override.rename is None:
            continue
        target = override.rename
        where = f"{override.where}: tools.{key}.override.rename"
        if target in exact:
            problems.append(
                f"{where}: {target!r} is the key of another rule (tools.{target} at "
                f"{exact[target].where}); a renamed tool is governed by the rule that renames it"
            )
        elif target in aliases:
            first = aliases[target]
            problems.append(
                f"{where}: tools.{first.key} at {first.where} renames a tool to {target!r} too"
            )
        else:
            aliases[target] = rule
    return aliases


def canonical_override(override: ToolOverride) -> dict[str, Any]:
    """The override's part of the policy version (every member: a change is a new version)."""
    return {
        "title": override.title,
        "description": override.description,
        "annotations": dict(override.annotations),
        "rename": override.rename,
        "fixed": dict(override.fixed),
        "hidden": list(override.hidden),
    }


def describe_override(override: ToolOverride) -> dict[str, Any]:
    """What ``policy explain`` shows of an override (the set members only; values of fixed
    arguments included: they come from the policy, which the operator can read anyway)."""
    shown: dict[str, Any] = {}
    for name in ("rename", "title", "description"):
        value = getattr(override, name)
        if value is not None:
            shown[name] = value
    if override.annotations:
        shown["annotations"] = dict(override.annotations)
    if override.fixed:
        shown["fixed"] = dict(override.fixed)
    if override.hidden:
        shown["hidden"] = list(override.hidden)
    shown["where"] = override.where
    return shown


def explain_overrides(policy: PolicySet, rows: list[dict[str, Any]], *, by_key: bool) -> None:
    """Add ``override`` (and ``exposed_as`` / ``renamed_from``) to ``policy explain`` rows of
    tools; ``by_key``: the rows name rule keys (``--all`` without a catalog), not tools."""
    for row in rows:
        name = row["name"]
        if by_key:
            rule = policy.exact.get(name) or next((r for r in policy.globs if r.key == name), None)
            override = rule.override if rule is not None else None
        else:
            override = policy.override_for(name)
            renamed = policy.aliases.get(name)
            if override is None and renamed is not None and renamed.override is not None:
                row["renamed_from"] = renamed.key
                override = renamed.override
        if override is None:
            continue
        if override.rename is not None and "renamed_from" not in row:
            row["exposed_as"] = override.rename
        row["override"] = describe_override(override)


def override_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The text form: one line per row with an override."""
    lines = []
    for row in rows:
        shown = row.get("override")
        if shown is None:
            continue
        parts = []
        if "exposed_as" in row:
            parts.append(f"exposed as {row['exposed_as']}")
        if "renamed_from" in row:
            parts.append(f"renamed from {row['renamed_from']}")
        parts += [f"{key} replaced" for key in ("title", "description") if key in shown]
        if "annotations" in shown:
            hints = ", ".join(f"{k}={json.dumps(v)}" for k, v in shown["annotations"].items())
            parts.append(f"annotations {hints}")
        if "fixed" in shown:
            parts.append(f"fixed {', '.join(sorted(shown['fixed']))}")
        if "hidden" in shown:
            parts.append(f"hidden {', '.join(shown['hidden'])}")
        lines.append(f"override: {row['name']}: {'; '.join(parts) or '-'} ({shown['where']})")
    return lines


def rename_warnings(policy: PolicySet, prefixes: Collection[str]) -> list[str]:
    """Renames the configured prefixes already show will collide: a new name inside a longer
    backend prefix than the one the renamed tool's backend has (the merge hides such a tool
    as ambiguous, :mod:`gateway.backend.catalog.tool_merge`). ``check`` and startup warn about
    them."""
    spaces = sorted((p for p in prefixes if p), key=len, reverse=True)
    found = []
    for target, rule in sorted(policy.aliases.items()):
        source = next((p for p in spaces if rule.key.startswith(p)), "")
        own = source if target.startswith(source) else ""
        inside = next((p for p in spaces if len(p) > len(own) and target.startswith(p)), None)
        if inside is not None and rule.override is not None:
            found.append(
                f"{rule.override.where}: tools.{rule.key}.override.rename: {target!r} lies in "
                f"another backend's prefix {inside!r}: the tool will be hidden as ambiguous"
            )
    return found
