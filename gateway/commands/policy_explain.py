"""``mcp-gateway policy explain``: what the policy decides for a principal, tool by tool.

The principal is described by ``--scopes``, ``--client-id``, ``--sub`` and ``--issuer``, or
(``--token-file``) is what the configured issuer's rules derive from a token's claims
(:mod:`gateway.auth.token_reading`): the report then shows each scope from its claim through the
prefix, the role and ``scope_map`` to the policy's name. The token's signature is not checked and
no issuer is called. :func:`gateway.policy.explain.explain` evaluates the same pure functions the
gateway uses; one line per tool, prompt, resource or rule is printed (``--json``: one JSON
document). Exit 0 when the policy loaded; 1 when the configuration or the policy is invalid
(every problem is printed to stderr); 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gateway.auth.token_reading import issuer_for, parse_token_file, read_token
from gateway.commands.options import CONFIG_ENV, Subparsers, add_config_option
from gateway.config import load_config
from gateway.errors import ConfigError
from gateway.jsonkit.read import UNBOUNDED, loads, peer_limits
from gateway.policy.explain import explain
from gateway.policy.explain_entries import FIRST_ISSUER
from gateway.policy.explain_text import LEGEND, print_text
from gateway.policy.policy_loader import load_policy
from gateway.seams import AUTH_METHODS, Principal, frozen_claims
from gateway.yaml_source import load_yaml

__all__ = ["register", "run", "run_explain"]


def register(subparsers: Subparsers) -> None:
    parser = _explain_parser(subparsers)
    parser.add_argument(
        "--token-file",
        type=Path,
        metavar="PATH",
        help="a token's claims instead of --scopes/--sub/--client-id: a compact JWT (read, not "
        "verified), a decoded JWT payload or an introspection answer (JSON); needs --config",
    )
    parser.add_argument(
        "--issuer",
        metavar="URL",
        help="the issuers: entry of the principal: with --token-file the one whose rules read "
        "it (default: the one its iss names, or the only one); with --sub/--client-id the "
        "issuer that gave those names (default: the first); needs --config",
    )
    parser.set_defaults(handler=run)


def _explain_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """``policy explain`` with the options that describe a principal by hand."""
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
    add_config_option(parser, "gateway.yaml whose policy: paths to use")
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
    return parser


def run(args: argparse.Namespace) -> int:
    if args.token_file is None:
        return run_explain(args)
    if args.scopes or args.sub or args.client_id:
        print(
            "policy explain: --token-file replaces --scopes, --sub and --client-id",
            file=sys.stderr,
        )
        return 2
    if not args.config:
        print("policy explain: --token-file needs --config (the issuers' rules)", file=sys.stderr)
        return 2
    try:
        # Secrets are not needed to read a token: a workstation usually lacks them.
        config = load_config(args.config, resolve_secrets=False)
        try:
            text = Path(args.token_file).read_text(encoding="utf-8")
            claims = parse_token_file(text)
            issuer = issuer_for(claims, config.issuers, args.issuer)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            detail = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise ConfigError([f"{args.token_file}: cannot read the token: {detail}"]) from None
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    reading = read_token(claims, issuer, config.resource, now=time.time())
    tokens = issuer.tokens
    principal = Principal(
        subject=reading.subject or "",
        client_id=reading.client_id,
        scopes=reading.policy_scopes,
        expires_at=math.inf,
        issuer=issuer.url,
        fingerprint="-",
        auth_method=tokens if tokens in AUTH_METHODS else "introspection",
        # What when: conditions read as claims: the token's, without the answer's own member.
        claims=frozen_claims({k: v for k, v in claims.items() if k != "active"}),
    )
    return run_explain(
        args,
        principal=principal,
        token=reading.as_json(),
        paths=config.policy_paths,
        issuers=config.issuer_urls,
    )


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
