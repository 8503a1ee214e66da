"""The policy version: a content hash of the merged policy's canonical form (docs/policy.md
#version-hash). Formatting, comments, the order of mapping keys and the split into files do not
change it; any change of meaning does."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from gateway.jsonkit.write import canonical as canonical_json
from gateway.policy import overrides
from gateway.policy.issuers import canonical_entries
from gateway.seams import ApprovalRule, Listing

if TYPE_CHECKING:
    from gateway.policy.rules import MethodRule, Rule

__all__ = ["policy_version"]


def policy_version(
    baseline: tuple[str, ...],
    methods: dict[str, MethodRule],
    sections: dict[str, dict[str, Rule]],
    listing: Listing,
    hierarchy: dict[str, tuple[str, ...]],
) -> str:
    """First 12 hex digits of SHA-256 over the canonical JSON of the merged policy.

    ``prompts``, ``resources`` and ``scope_hierarchy`` enter only when the policy has them, so a
    policy without them keeps the version it had before those sections existed. The order of a
    hierarchy's implied scopes means nothing, so it is sorted.
    """
    canonical: dict[str, Any] = {
        "version": 1,
        "baseline_scopes": list(baseline),
        **({"listing": listing} if listing != "allowed" else {}),
        "methods": {name: list(rule.scopes) for name, rule in methods.items()},
    }
    for section, rules in sections.items():
        if section == "tools" or rules:
            canonical[section] = {rule.key: _canonical_rule(rule) for rule in rules.values()}
    if hierarchy:
        canonical["scope_hierarchy"] = {scope: sorted(set(i)) for scope, i in hierarchy.items()}
    return hashlib.sha256(canonical_json(canonical, ascii_only=True)).hexdigest()[:12]


def _canonical_rule(rule: Rule) -> dict[str, Any]:
    return {
        "scopes": list(rule.scopes),
        "any_of": [list(alternative) for alternative in rule.any_of],
        "clients": canonical_entries("clients", rule.clients),
        "subjects": canonical_entries("subjects", rule.subjects) or None,
        "deny": rule.deny,
        "rate_limit": list(rule.rate_limit) if rule.rate_limit else None,
        "max_concurrency": rule.max_concurrency,
        "description": rule.description,
        **({"tasks": True} if rule.tasks else {}),
        **({"when": [c.source for c in rule.when]} if rule.when else {}),
        **({"override": overrides.canonical_override(rule.override)} if rule.override else {}),
        **({"guardrails": list(rule.guardrails)} if rule.guardrails else {}),
        **({"approval": _canonical_approval(rule.approval)} if rule.approval else {}),
    }


def _canonical_approval(approval: ApprovalRule) -> dict[str, Any]:
    return {
        "by": approval.approvers,
        "ttl_s": approval.ttl_s,
        "redact": list(approval.redact),
    }
