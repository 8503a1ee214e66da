"""What every command that reads ``gateway.yaml`` shares: ``--config`` and its default."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

__all__ = [
    "CONFIG_ENV",
    "Subparsers",
    "add_config_option",
    "logging_options",
    "print_problems",
    "read_token_file",
    "require_config",
]

CONFIG_ENV: Final = "MCP_GATEWAY_CONFIG"
"""Environment variable naming the configuration file when ``--config`` is not given."""

Subparsers = Any
"""``argparse._SubParsersAction[argparse.ArgumentParser]`` (a private argparse type)."""

_LOG_FORMATS: Final = ("json", "console")
_LOG_LEVELS: Final = ("debug", "info", "warning", "error")


def logging_options() -> argparse.ArgumentParser:
    """``--log-format`` and ``--log-level``, as a parent parser: of the main parser and of the
    commands that take them after their name too."""
    # SUPPRESS defaults let the options appear before or after the subcommand without the
    # subparser's defaults overwriting a value given on the main parser.
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("logging")
    group.add_argument(
        "--log-format",
        choices=_LOG_FORMATS,
        default=argparse.SUPPRESS,
        help="json lines (default) or readable console output; overrides logging.format",
    )
    group.add_argument(
        "--log-level",
        choices=_LOG_LEVELS,
        default=argparse.SUPPRESS,
        help="minimum level (default info); overrides logging.level",
    )
    return common


def add_config_option(parser: argparse.ArgumentParser, what: str = "gateway.yaml to use") -> None:
    """``--config PATH`` / ``-c PATH``, by default ``$MCP_GATEWAY_CONFIG``."""
    parser.add_argument(
        "--config",
        "-c",
        metavar="PATH",
        default=os.environ.get(CONFIG_ENV),
        help=f"{what} (default: ${CONFIG_ENV})",
    )


def require_config(args: argparse.Namespace) -> Path:
    """``--config``, or exit 2 naming both ways to give it."""
    if not args.config:
        print(
            f"mcp-gateway {args.command}: no configuration: pass --config PATH or set {CONFIG_ENV}",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return Path(args.config)


def read_token_file(path: str) -> str:
    """The token in the file at ``path`` (``-``: standard input), without surrounding white
    space: never from the command line, which process lists show. Raises ``OSError``."""
    from_stdin = path == "-"
    return (sys.stdin.read() if from_stdin else Path(path).read_text("utf-8")).strip()


def print_problems(problems: Sequence[str], path: Path) -> None:
    """Each problem on stdout (``file:line:col: key.path: message``), their count on stderr."""
    for problem in problems:
        print(problem)
    count = len(problems)
    print(f"{path}: {count} problem{'s' if count != 1 else ''}", file=sys.stderr)
