"""``mcp-gateway policy explain``: what the policy decides for a given token, tool by tool.

Evaluates the same pure functions the gateway uses (:mod:`gateway.policy.evaluate`) for a
principal described on the command line, and prints one line per tool, prompt, resource or rule:
``allow``, ``step-up`` (403 ``insufficient_scope``: more scopes would let the caller in),
``denied`` (403 ``condition_denied``: the scopes allow, a ``when:`` condition of the rule does
not; the conditions a listing decides, and with ``--arguments`` all of them) or ``hidden``
(answered like an unknown tool or prompt, ``-32602``, or a resource not found: ``-32602``, on the
2025 revisions ``-32002``), with the matched rule, the reason and the missing scopes.
``--json`` prints the same as one JSON document. Exit 0 when the policy loaded; 1 when the
configuration or the policy is invalid (every problem is printed to stderr); 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gateway.config import load_config
from gateway.errors import AmbiguousResourceUri, ConfigError
from gateway.jsonkit.read import UNBOUNDED, loads, peer_limits
from gateway.policy.explain_conditions import explain_conditions
from gateway.policy.explain_entries import FIRST_ISSUER, explain_entries
from gateway.policy.explain_text import LEGEND, print_text
from gateway.policy.issuers import issuer_warnings
from gateway.policy.loader import load_policy
from gateway.policy.model import PolicySet
from gateway.policy.overrides import explain_overrides
from gateway.policy.uri import resource_uri
from gateway.seams import Decision, Listing, Principal, listed
from gateway.yaml_source import load_yaml

__all__ = ["Explained", "explain", "register", "run_explain"]

CONFIG_ENV: Final = "MCP_GATEWAY_CONFIG"
"""Same default as the other subcommands (``gateway.cli.CONFIG_ENV``)."""

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
            **shown,
        }


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``policy explain`` to the ``mcp-gateway`` command and return its parser (extended
    with ``--token-file`` by :mod:`gateway.app.policy_explain`, which reads tokens with the
    auth layer's rules: this layer may not import it)."""
    policy = subparsers.add_parser(
        "policy",
        help="inspect policies (policy explain)",
        description="Inspect the per-tool scope policy.",
    )
    actions = policy.add_subparsers(dest="policy_command", metavar="<action>", required=True)
    parser: argparse.ArgumentParser = actions.add_parser(
        "explain",
        help="show allow / step-up / hidden per tool for a token's scopes",
        description="Evaluate the policy for a principal described by --scopes, --client-id "
        "and --sub. " + LEGEND + ".",
    )
    parser.add_argument(
        "--config",
        "-c",
        metavar="PATH",
        default=os.environ.get(CONFIG_ENV),
        help=f"gateway.yaml whose policy: paths to use (default: ${CONFIG_ENV})",
    )
    parser.add_argument(
        "--policy",
        action="append",
        type=Path,
        metavar="PATH",
        help="a policy file or directory to use instead of the configuration (repeatable)",
    )
    parser.add_argument(
        "--scopes", default="", help='granted scopes, space-separated: "mcp:access docs:read"'
    )
    parser.add_argument("--client-id", metavar="ID", help="the token's client_id")
    parser.add_argument("--sub", metavar="SUB", default="", help="the token's subject (sub)")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--tool", metavar="NAME", help="explain one tool name")
    which.add_argument("--prompt", metavar="NAME", help="explain one prompt name")
    which.add_argument("--resource", metavar="URI", help="explain one resource URI")
    which.add_argument(
        "--all", action="store_true", help="every catalog tool (with --catalog-file) or rule"
    )
    parser.add_argument(
        "--catalog-file",
        type=Path,
        metavar="PATH",
        help="JSON: a list of tool names, a list of Tool objects or a tools/list result",
    )
    parser.add_argument(
        "--arguments",
        metavar="JSON",
        help="the call's arguments as a JSON object, for the when: conditions that read them: "
        '\'{"env": "prod"}\'',
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=run_explain)
    return parser


def run_explain(
    args: argparse.Namespace,
    *,
    principal: Principal | None = None,
    token: Mapping[str, Any] | None = None,
    paths: Sequence[Path] | None = None,
    issuers: Sequence[str] | None = None,
) -> int:
    """``principal`` (with ``token``, what was derived from a token file): instead of the one
    ``--scopes``, ``--client-id``, ``--sub`` and ``--issuer`` describe; ``paths`` and
    ``issuers``: the policy files and the issuers' urls of a configuration the caller loaded
    already."""
    try:
        if paths is None or args.policy:
            paths, configured = _configured(args)
            issuers = configured if issuers is None else issuers
        issuers = tuple(issuers or ())
        issuer = principal.issuer if principal is not None else _principal_issuer(args, issuers)
        # Without a configuration the first issuer has no url: the principal stands for it.
        policy = load_policy(paths, issuers=issuers or (issuer,))
        catalog = _read_catalog(args.catalog_file) if args.catalog_file else None
        arguments = _arguments(args.arguments)
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    principal = principal or Principal(
        subject=args.sub,
        client_id=args.client_id,
        scopes=frozenset(args.scopes.split()),
        expires_at=math.inf,
        issuer=issuer,
        fingerprint="-",
    )
    report = explain(
        policy,
        principal,
        tool=args.tool,
        prompt=args.prompt,
        resource=args.resource,
        catalog=catalog,
        token=token,
        arguments=arguments,
    )
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print_text(report, sys.stdout)
    return 0


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
        warnings = policy.unmatched_rules(names)
        warnings += [
            f"catalog tool {name!r} has no rule: denied and hidden"
            for name in policy.unruled_tools(names)
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
        policy, principal, results, section=section, by_key=subject == "rules",
        arguments=arguments,
    )  # fmt: skip
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
    at_listing = policy.decide_conditions(principal, name, None, section=section)
    refused = at_listing
    if arguments is not None:
        refused = policy.decide_conditions(principal, name, arguments, section=section)
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


def _configured(args: argparse.Namespace) -> tuple[list[Path], tuple[str, ...]]:
    """The policy paths and the configured issuers' urls (none with ``--policy``)."""
    if args.policy:
        return list(args.policy), ()
    if not args.config:
        raise ConfigError(
            [f"policy explain: pass --config PATH, --policy PATH or set {CONFIG_ENV}"]
        )
    config_path = Path(args.config)
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        # explain needs only the policy paths and the issuers' urls; a workstation often lacks
        # the secrets the full configuration references, so fall back to those keys alone.
        paths = _policy_key(config_path)
        if paths is None:
            raise
        print(
            f"note: {config_path} has {len(exc.problems)} problem(s) (see mcp-gateway check); "
            "using its policy: paths anyway",
            file=sys.stderr,
        )
        return paths, _issuer_urls(config_path)
    return list(config.policy_paths), config.issuer_urls


def _principal_issuer(args: argparse.Namespace, issuers: tuple[str, ...]) -> str:
    """``--issuer`` (one of the configured urls), else the first configured issuer, else (no
    configuration) :data:`FIRST_ISSUER`."""
    wanted: str | None = getattr(args, "issuer", None)
    if wanted is None:
        return issuers[0] if issuers else FIRST_ISSUER
    if wanted not in issuers:
        shown = ", ".join(issuers) or "none: pass --config"
        raise ConfigError([f"--issuer {wanted}: no configured issuer has this url ({shown})"])
    return wanted


def _issuer_urls(config_path: Path) -> tuple[str, ...]:
    """The ``url`` of ``issuer:`` or of each ``issuers:`` entry, read as written."""
    doc = load_yaml(config_path)
    raw = doc.value if isinstance(doc.value, dict) else {}
    entries = [raw.get("issuer")] if "issuer" in raw else raw.get("issuers")
    if not isinstance(entries, list):
        return ()
    found = [e.get("url") for e in entries if isinstance(e, dict)]
    return tuple(url for url in found if isinstance(url, str))


def _policy_key(config_path: Path) -> list[Path] | None:
    doc = load_yaml(config_path)
    raw = doc.value.get("policy") if isinstance(doc.value, dict) else None
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        return None
    base = config_path.resolve().parent
    return [Path(item) if Path(item).is_absolute() else base / item for item in items]


def _read_catalog(path: Path) -> list[str]:
    problem = f"{path}: expected a JSON list of tool names, of Tool objects, or a tools/list result"
    try:
        data = loads(path.read_bytes(), peer_limits(UNBOUNDED))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError([f"{path}: cannot read catalog file: {type(exc).__name__}"]) from None
    if isinstance(data, dict):
        data = data.get("result", data)
        data = data.get("tools") if isinstance(data, dict) else None
    if not isinstance(data, list):
        raise ConfigError([problem])
    names = []
    for item in data:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str):
            raise ConfigError([problem])
        names.append(name)
    return names


def _arguments(text: str | None) -> dict[str, Any] | None:
    """``--arguments``: a JSON object, or None when not given."""
    if text is None:
        return None
    try:
        value = loads(text, peer_limits(UNBOUNDED))
    except ValueError as exc:
        raise ConfigError([f"--arguments: not JSON: {exc}"]) from None
    if not isinstance(value, dict):
        raise ConfigError(["--arguments: must be a JSON object"])
    return value
