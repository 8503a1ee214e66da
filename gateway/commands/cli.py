"""The ``mcp-gateway`` command: its parser and :func:`main` (also ``python -m gateway.commands``).

Each command is a module of :mod:`gateway.commands` with a ``register(subparsers)`` function
that adds its parser and its ``handler`` (:data:`SUBCOMMANDS`), imported here like any other
module so the layer test sees the dependency.

Exit codes: 0 success; 1 invalid configuration or policy, or a listener that cannot bind (with
``serve --workers N``, also a worker that had to be killed at the end of the stop); 2 usage
errors (argparse); 3 ``serve --workers N``: a worker kept crashing (:mod:`gateway.workers.slot`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Final

import gateway
from gateway.commands import (
    audit_command,
    catalog_command,
    check,
    connect_command,
    demo,
    policy_explain,
    revoke,
    serve,
    upstream_tokens_command,
)
from gateway.commands.options import CONFIG_ENV, Subparsers, logging_options
from gateway.observability.logging import configure

__all__ = ["CONFIG_ENV", "SUBCOMMANDS", "build_parser", "main"]


def _register_version(subparsers: Subparsers) -> None:
    version = subparsers.add_parser(
        "version", parents=[logging_options()], help="print the version"
    )
    version.set_defaults(handler=_cmd_version)


SUBCOMMANDS: Final[tuple[Callable[[Subparsers], None], ...]] = (
    serve.register,
    check.register,
    _register_version,
    demo.register,
    policy_explain.register,
    revoke.register,
    upstream_tokens_command.register,
    connect_command.register,
    audit_command.register,
    catalog_command.register,
)
"""Each command's ``register``: it adds its parser and its ``handler``, in the order of
``--help``."""


def build_parser() -> argparse.ArgumentParser:
    common = logging_options()
    parser = argparse.ArgumentParser(
        prog="mcp-gateway",
        description="OAuth-protected MCP resource-server gateway.",
        parents=[common],
        epilog="Run 'mcp-gateway <command> --help' for a command's options.",
    )
    parser.add_argument(
        "--version", action="version", version=f"mcp-gateway {_version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for register in SUBCOMMANDS:
        register(sub)
    return parser


def _cmd_version(args: argparse.Namespace) -> int:
    print(f"mcp-gateway {_version()}")
    return 0


def _version() -> str:
    try:
        return metadata.version("mcp-resource-gateway")
    except metadata.PackageNotFoundError:
        return gateway.__version__


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command != "serve":
        # serve configures logging itself, once, after reading logging.* from the config.
        configure(getattr(args, "log_format", "json"), getattr(args, "log_level", "info"))
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)
