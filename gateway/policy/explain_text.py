"""The text form of ``mcp-gateway policy explain`` (:mod:`.explain` builds the report)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TextIO

from gateway.policy.explain_conditions import condition_lines
from gateway.policy.explain_entries import entry_lines
from gateway.policy.overrides import override_lines

__all__ = ["LEGEND", "print_text"]

LEGEND: Final = (
    "step-up = 403 insufficient_scope naming every scope the tool needs; "
    "denied = 403 condition_denied (a when: condition refuses; no step-up); "
    "hidden = answered like an unknown tool (-32602)"
)
_SURFACE_LEGEND: Final = (
    "a hidden prompt is answered like an unknown prompt (-32602), "
    "a hidden resource like one not found (-32602; 2025 revisions: -32002)"
)


def print_text(report: dict[str, Any], out: TextIO) -> None:
    who = report["principal"]
    out.write(f"policy {report['policy_version']} from {', '.join(report['sources'])}\n")
    out.write(
        f"principal: sub={who['sub'] or '-'} client_id={who['client_id'] or '-'} "
        f"issuer={who['issuer']} scopes={' '.join(who['scopes']) or '-'}\n"
    )
    if "token" in report:
        _print_token(report["token"], out)
    if "scope_hierarchy" in report:
        out.write(f"implied by scope_hierarchy: {' '.join(report['implied_scopes']) or '-'}\n")
    if report["listing"] == "step_up":
        out.write("listing: step_up (tools/list also shows the step-up tools)\n")
    out.write("\n")
    evaluated = report["evaluated"]
    heading = {
        "tool": "TOOL",
        "catalog": "TOOL",
        "rules": "RULE KEY",
        "prompt": "PROMPT",
        "resource": "RESOURCE",
    }[evaluated]
    _table(out, heading, report["results"])
    for key, title in (("prompts", "PROMPT RULE"), ("resources", "RESOURCE RULE")):
        if report[key]:
            out.write("\n")
            _table(out, title, report[key])
    if report["methods"]:
        out.write("\n")
        _table(out, "METHOD", report["methods"])
    for line in override_lines(report["results"]):
        out.write(f"{line}\n")
    for rows in (report["results"], report["prompts"], report["resources"]):
        for line in entry_lines(rows):
            out.write(f"{line}\n")
    for rows in (report["results"], report["prompts"], report["resources"]):
        for line in condition_lines(rows):
            out.write(f"{line}\n")
    for rows in (report["results"], report["prompts"], report["resources"]):
        for row in rows:
            if row.get("guardrails"):
                # Asked in this order, after everything local allowed (docs/policy.md#guardrails).
                out.write(f"guardrails: {row['name']}: {', '.join(row['guardrails'])}\n")
            if row.get("approval"):
                # Each call waits for a person's approval (docs/policy.md#approvals).
                held = row["approval"]
                out.write(f"approval: {row['name']}: by {held['by']}, {held['ttl_s']} s\n")
    out.write(f"\n{LEGEND}\n")
    if evaluated in ("prompt", "resource") or report["prompts"] or report["resources"]:
        out.write(f"{_SURFACE_LEGEND}\n")
    for warning in report["warnings"]:
        out.write(f"warning: {warning}\n")


def _print_token(token: Mapping[str, Any], out: TextIO) -> None:
    """claim -> prefix (scope, role or group) -> map -> policy scope, one line per scope."""
    out.write(f"token: issuer {token['issuer']} (tokens: {token['tokens']})\n")
    for step in token["derivation"]:
        prefix = {"role": "role prefix", "group": "group prefix"}.get(step["source"], "prefix")
        mapped = f"map -> {step['scope']}" if step["mapped"] else "not mapped"
        if step.get("dropped"):
            mapped = "dropped: not in scope_map (scope_map_only)"
        out.write(
            f"  {step['claim']} {step['value']!r} -> {prefix} {step['spelled']} -> {mapped}\n"
        )
    if not token["derivation"]:
        out.write("  (no scopes)\n")
    out.write(f"policy scopes: {' '.join(token['policy_scopes']) or '-'}\n")
    if token["refusal"] is not None:
        out.write(f"warning: the gateway would refuse this token now: {token['refusal']}\n")


def _table(out: TextIO, heading: str, rows: list[dict[str, Any]]) -> None:
    header = (heading, "DECISION", "RULE", "REASON", "MISSING SCOPES")
    lines = [header] + [
        (
            row["name"],
            row["decision"],
            row["rule"] or "-",
            row["reason"],
            " ".join(row["missing_scopes"]) or "-",
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    for line in lines:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        out.write("  ".join([*cells, line[-1]]).rstrip() + "\n")
