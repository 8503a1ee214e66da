"""What the policy decides for a given principal, tool by tool (``mcp-gateway policy explain``,
:mod:`gateway.commands.policy_explain`).

Asks the policy set what the gateway asks it (its ``decide_*`` methods) for a principal, one
report entry per tool, prompt, resource or rule:
``allow``, ``step-up`` (403 ``insufficient_scope``: more scopes would let the caller in),
``denied`` (403 ``condition_denied``: the scopes allow, a ``when:`` condition of the rule does
not; the conditions a listing decides, and with ``--arguments`` all of them) or ``hidden``
(answered like an unknown tool or prompt, ``-32602``, or a resource not found: ``-32602``, on the
2025 revisions ``-32002``), with the matched rule, the reason and the missing scopes.
The report is a JSON-ready dict (:func:`explain`); :mod:`.explain_text` prints its text form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway.errors import AmbiguousResourceUri
from gateway.policy.explain_conditions import explain_conditions
from gateway.policy.explain_entries import FIRST_ISSUER, explain_entries
from gateway.policy.overrides import explain_overrides
from gateway.policy.policy_set import PolicySet
from gateway.policy.uri import resource_uri
from gateway.policy.warnings import issuer_warnings, unmatched_rules, unruled_tools
from gateway.seams import (
    ACTIONS,
    AccessQuestion,
    ApprovalRule,
    Decision,
    Listing,
    Principal,
    listed,
)

__all__ = ["Explained", "explain"]

CONDITION_REASONS: Final = ("condition", "condition_error")
"""``Decision.reason`` of a ``when:`` refusal (403 ``condition_denied``, no step-up)."""
METHODS: Final = ("server/discover", "tools/list")
"""Methods shown with ``--all`` (their extra scopes come from ``methods:``)."""
SURFACE_METHODS: Final = ("prompts/list", "resources/list", "resources/templates/list")
"""Shown with ``--all`` too when the policy has a ``prompts:`` or ``resources:`` section."""


@dataclass(frozen=True, slots=True)
class Explained:
    """One evaluated name: a tool (``--tool``, catalog) or a rule key (``--all`` alone)."""

    name: str
    decision: Decision
    listed_after_conditions: bool | None = None
    """When the scopes allowed: whether the listing still shows it (its ``when:`` conditions
    that a listing decides hold). None: the listing follows :attr:`decision`."""

    @property
    def verdict(self) -> str:
        if self.decision.allowed:
            return "allow"
        if self.decision.reason in CONDITION_REASONS:
            return "denied"
        return "step-up" if self.decision.visible else "hidden"

    def as_json(self, listing: Listing | None = None) -> dict[str, Any]:
        """``listing`` (tools only): say whether ``tools/list`` shows the tool."""
        d = self.decision
        shown_now = self.listed_after_conditions
        if shown_now is None and listing is not None:
            shown_now = listed(d, listing)
        shown = {} if listing is None else {"listed": shown_now}
        return {
            "name": self.name,
            "decision": self.verdict,
            "allowed": d.allowed,
            "visible": d.visible,
            "rule": d.rule,
            "reason": d.reason,
            "required_scopes": list(d.required_scopes),
            "missing_scopes": list(d.missing_scopes),
            **({"guardrails": list(d.guardrails)} if d.guardrails else {}),
            **({"approval": _approval(d.approval)} if d.approval else {}),
            **shown,
        }


def explain(
    policy: PolicySet,
    principal: Principal,
    *,
    tool: str | None = None,
    prompt: str | None = None,
    resource: str | None = None,
    catalog: Sequence[str] | None = None,
    token: Mapping[str, Any] | None = None,
    arguments: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The explanation as a JSON-ready dict (``tool``, ``prompt``, ``resource``: one name;
    else the catalog's tools or every rule; ``token``: how the principal was derived;
    ``arguments``: the call's, for the ``when:`` conditions that read them)."""
    warnings: list[str] = []
    one = tool is not None or prompt is not None or resource is not None
    prompts: list[Explained] = []
    resources: list[Explained] = []

    def decided(name: str, ladder: Decision, section: str = "tools") -> Explained:
        return _with_conditions(
            policy, principal, name, ladder, section=section, arguments=arguments
        )

    if tool is not None:
        items = [decided(tool, policy.decide_tool(principal, tool))]
        subject = "tool"
    elif prompt is not None:
        items = [decided(prompt, policy.decide_prompt(principal, prompt), "prompts")]
        subject = "prompt"
    elif resource is not None:
        items = [decided(resource, policy.decide_resource(principal, resource), "resources")]
        subject = "resource"
        warnings = _spelling(resource)
    elif catalog is not None:
        names = sorted(set(catalog))
        items = [decided(name, policy.decide_tool(principal, name)) for name in names]
        warnings = unmatched_rules(policy, names)
        warnings += [
            f"catalog tool {name!r} has no rule: denied and hidden"
            for name in unruled_tools(policy, names)
        ]
        subject = "catalog"
    else:
        items = [decided(r.key, policy.decide_rule(principal, r.key)) for r in policy.rules]
        subject = "rules"
    if not one:
        prompts = [
            decided(r.key, policy.decide_rule(principal, r.key, "prompts"), "prompts")
            for r in policy.prompts.rules
        ]
        resources = [
            decided(r.key, policy.decide_rule(principal, r.key, "resources"), "resources")
            for r in policy.resources.rules
        ]
    shown_methods: tuple[str, ...] = METHODS
    if policy.prompts or policy.resources or any(m in policy.methods for m in SURFACE_METHODS):
        shown_methods = (*METHODS, *SURFACE_METHODS)
    methods = (
        [] if one else [Explained(m, policy.decide_method(principal, m)) for m in shown_methods]
    )
    results = [item.as_json(policy.listing) for item in items]
    if subject in ("tool", "catalog", "rules"):
        explain_overrides(policy, results, by_key=subject == "rules")
    section = {"prompt": "prompts", "resource": "resources"}.get(subject, "tools")
    explain_conditions(
        policy,
        principal,
        results,
        section=section,
        by_key=subject == "rules",
        arguments=arguments,
    )
    explain_entries(policy, results, section=section, by_key=subject == "rules")
    if policy.issuers and policy.issuers[0] != FIRST_ISSUER:
        warnings += issuer_warnings(policy)
    prompt_rows = [item.as_json(policy.listing) for item in prompts]
    resource_rows = [item.as_json(policy.listing) for item in resources]
    for rows, rows_section in ((prompt_rows, "prompts"), (resource_rows, "resources")):
        explain_conditions(
            policy, principal, rows, section=rows_section, by_key=True, arguments=arguments
        )
        explain_entries(policy, rows, section=rows_section, by_key=True)
    return {
        "policy_version": policy.version,
        "sources": list(policy.sources),
        "baseline_scopes": list(policy.baseline_scopes),
        "principal": {
            "sub": principal.subject,
            "client_id": principal.client_id,
            "issuer": principal.issuer,
            "scopes": sorted(principal.scopes),
        },
        **_hierarchy(policy, principal),
        "listing": policy.listing,
        "evaluated": subject,
        "results": results,
        "prompts": prompt_rows,
        "resources": resource_rows,
        "methods": [item.as_json() for item in methods],
        "warnings": warnings,
        **({"token": dict(token)} if token is not None else {}),
    }


def _spelling(uri: str) -> list[str]:
    """What the gateway makes of a resource URI before any rule (docs/policy.md#resources)."""
    try:
        normal = resource_uri(uri)
    except AmbiguousResourceUri:
        return ["ambiguous URI: refused before any rule (-32602, ambiguous_resource_uri)"]
    if normal is None or normal == uri:
        return []
    return [f"decided on, and sent to the backend as, its normal form {normal}"]


def _with_conditions(
    policy: PolicySet,
    principal: Principal,
    name: str,
    ladder: Decision,
    *,
    section: str,
    arguments: Mapping[str, Any] | None,
) -> Explained:
    """What the gateway decides after the scopes allowed: the ``when:`` conditions of the rule,
    by its own function (those a listing decides; with ``--arguments`` all of them). A refusal
    replaces the allow (403 ``condition_denied``); the listing leaves the item out when one of
    the conditions it decides refuses."""
    if not ladder.allowed:
        return Explained(name, ladder)
    action = ACTIONS[section]
    at_listing = policy.decide_conditions(principal, AccessQuestion(action, name))
    refused = at_listing
    if arguments is not None:
        refused = policy.decide_conditions(principal, AccessQuestion(action, name, None, arguments))
    return Explained(name, refused or ladder, listed_after_conditions=at_listing is None)


def _hierarchy(policy: PolicySet, principal: Principal) -> dict[str, Any]:
    """``scope_hierarchy`` as declared and what it adds to this principal (only when the
    policy has one)."""
    if not policy.hierarchy:
        return {}
    implied = policy.hierarchy.expand(principal.scopes) - principal.scopes
    return {
        "scope_hierarchy": {k: list(v) for k, v in policy.hierarchy.declared.items()},
        "implied_scopes": sorted(implied),
    }


def _approval(approval: ApprovalRule) -> dict[str, Any]:
    """A rule's ``approval:`` as ``policy explain`` shows it (docs/policy.md#approvals)."""
    return {"by": approval.approvers, "ttl_s": approval.ttl_s, "redact": list(approval.redact)}
