"""``mcp-gateway policy explain --token-file``: the policy's decisions for one real token.

:mod:`gateway.policy.explain` evaluates the policy for a principal; this module (at the top of
the layers, beside the CLI) adds ``--token-file`` and ``--issuer``: the principal is then what
the configured issuer's rules derive from the token's claims (:mod:`gateway.auth.token_reading`),
and the report shows each scope from its claim through the prefix, the role and ``scope_map``
to the policy's name. The token's signature is not checked and no issuer is called.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from gateway.auth.token_reading import issuer_for, parse_token_file, read_token
from gateway.config import load_config
from gateway.errors import ConfigError
from gateway.policy import explain
from gateway.seams import AUTH_METHODS, Principal, frozen_claims

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    """``policy explain`` with ``--token-file`` (``gateway.cli.SUBCOMMANDS``)."""
    parser = explain.register(subparsers)
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


def run(args: argparse.Namespace) -> int:
    if args.token_file is None:
        return explain.run_explain(args)
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
    return explain.run_explain(
        args,
        principal=principal,
        token=reading.as_json(),
        paths=config.policy_paths,
        issuers=config.issuer_urls,
    )
