"""What ``check`` prints and startup logs about a policy set that loaded (docs/policy.md).

Rules no configured backend can ever match, renames into another backend's prefix, and
``subjects``/``clients`` entries whose issuer is ambiguous or not configured. Warnings only: each
such rule or entry grants less than it seems to, never more.
"""

from __future__ import annotations

from collections.abc import Collection

from gateway.policy.issuers import issuer_warnings
from gateway.policy.model import PolicySet
from gateway.policy.overrides import rename_warnings

__all__ = ["policy_warnings"]


def policy_warnings(policy: PolicySet, prefixes: Collection[str] | None) -> list[tuple[str, str]]:
    """(log event, text) of each warning. ``prefixes``: the configured backends' name prefixes;
    None when the configuration could not say (then only the issuers' entries are checked)."""
    found: list[tuple[str, str]] = []
    if prefixes is not None:
        found += [("policy.rule_unreachable", text) for text in policy.unreachable_rules(prefixes)]
        found += [("policy.rename_ambiguous", text) for text in rename_warnings(policy, prefixes)]
    found += [("policy.entry_issuer", text) for text in issuer_warnings(policy)]
    return found
