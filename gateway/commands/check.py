"""``mcp-gateway check``: every problem of the configuration and of the policy files it names.

Printed as ``file:line:col: key.path: message`` on stdout, in one run; warnings on stderr. Exit
0 when valid, 1 otherwise. ``serve`` reads the policy files the same way before it starts
(:func:`load_policies`, :func:`policy_warnings`, :func:`demo_warnings`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Collection, Sequence
from pathlib import Path

from gateway.commands.catalog_command import check_lock
from gateway.commands.options import (
    Subparsers,
    add_config_option,
    logging_options,
    print_problems,
    require_config,
)
from gateway.config import Config
from gateway.config.issuer import scope_map_warnings
from gateway.config.loader import inspect_config
from gateway.policy import policy_loader
from gateway.policy.policy_set import PolicySet
from gateway.policy.warnings import policy_warnings as rule_warnings

__all__ = ["demo_warnings", "load_policies", "policy_warnings", "register"]


def register(subparsers: Subparsers) -> None:
    check = subparsers.add_parser(
        "check",
        parents=[logging_options()],
        help="validate the configuration and policies, then exit",
        description="Print every problem of the configuration and of the policy files it names "
        "as file:line:col: key.path: message, in one run. Exit 0 when valid, 1 otherwise. "
        "Warnings go to stderr.",
    )
    add_config_option(check)
    check.add_argument(
        "--skip-secrets",
        action="store_true",
        help="do not read {env:}/{file:} secret references (lint without production secrets)",
    )
    check.set_defaults(handler=_cmd_check)


def load_policies(
    paths: Sequence[Path], issuers: Sequence[str], guardrails: Collection[str] | None = None
) -> tuple[list[str], PolicySet | None, tuple[str, ...], PolicySet | None]:
    """Validate the policy files for these issuers' urls (and guardrail names: None, not
    checked): (problems, the policy set or None, the files that declare themselves a demo, the
    set merged from what the files got right even with problems)."""
    report = policy_loader.inspect_policy(paths, issuers=issuers, guardrails=guardrails)
    if report.problems or report.policy is None:
        return list(report.problems), None, policy_loader.demo_sources(paths), report.policy
    return [], report.policy, report.policy.demo_sources, report.policy


def policy_warnings(config: Config | None, policy: PolicySet | None) -> list[str]:
    """What the configuration says about the policy that neither can say alone: each issuer's
    ``scope_map`` against the scopes the policy names; each ``approval:`` against the login
    surface its page needs and the claims a sign-in keeps."""
    if config is None or policy is None:
        return []
    found = scope_map_warnings(config.issuers, policy.known_scopes, policy.baseline_scopes)
    return found + approval_warnings(config, policy)


def approval_warnings(config: Config, policy: PolicySet) -> list[str]:
    """A rule's ``approval:`` that can never be given (docs/policy.md#approvals)."""
    found: list[str] = []
    for rule in policy.rules:
        held = rule.approval
        if held is None:
            continue
        if config.login is None:
            found.append(
                f"{rule.where}: tools.{rule.key}.approval: no login: section, so no approval "
                "page: every call of it is refused (approval_unavailable)"
            )
        elif held.by != "self" and config.login.verifier is not None:
            found.append(
                f"{rule.where}: tools.{rule.key}.approval: an external verifier's sign-in "
                "keeps no claims: no one can approve it"
            )
        elif held.by != "self" and held.claim not in config.approvals.approver_claims:
            found.append(
                f"{rule.where}: tools.{rule.key}.approval: claim {held.claim!r} is not in "
                "approvals.approver_claims: no one can approve it"
            )
    return found


def demo_warnings(sources: Sequence[str]) -> list[str]:
    return [
        f"{source}: declares itself a demo policy (demo: true): it grants example tools to "
        "anyone with the demo scopes; do not load it in a deployment"
        for source in sources
    ]


def _cmd_check(args: argparse.Namespace) -> int:
    """Every stage's problems in one run: the configuration's (schema, sections, secrets) and,
    whenever the policy paths could be read, the policy files' too."""
    path = require_config(args)
    report = inspect_config(path, resolve_secrets=not args.skip_secrets)
    problems = list(report.problems)
    policy = partial = None
    demos: tuple[str, ...] = ()
    if report.policy_paths is not None:
        # partial: what the files got right, for the warnings a mistake must not hide.
        policy_problems, policy, demos, partial = load_policies(
            report.policy_paths, report.issuer_urls, report.guardrails
        )
        problems.extend(policy_problems)
    else:
        print(
            f"note: {path}: the policy files were not checked (policy: is unreadable)",
            file=sys.stderr,
        )
    problems.extend(check_lock(report.config))
    cross = policy_warnings(report.config, policy)
    # Rules no backend matches, renames into another prefix, entries of an unknown issuer.
    rules = [] if partial is None else rule_warnings(partial, report.backend_prefixes)
    for warning in (*report.warnings, *cross, *demo_warnings(demos), *(t for _, t in rules)):
        print(f"warning: {warning}", file=sys.stderr)
    if problems:
        print_problems(problems, path)
        return 1
    suffix = f" (policy version {policy.version})" if policy is not None else ""
    skipped = " (secrets not read)" if args.skip_secrets else ""
    print(f"{path}: OK{suffix}{skipped}")
    return 0
