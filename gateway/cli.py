"""The ``mcp-gateway`` command: ``serve``, ``check``, ``version``, ``demo``, ``policy explain``,
``revoke``, ``audit verify`` and ``catalog`` (:mod:`gateway.app.catalog_command`).

Exit codes: 0 success; 1 invalid configuration or policy, or a listener that cannot bind (with
``serve --workers N``, also a worker that had to be killed at the end of the stop); 2 usage
errors (argparse); 3 ``serve --workers N``: a worker kept crashing (:mod:`gateway.workers.slot`).

The subcommands that live with their layer (``demo`` in :mod:`gateway.demo`, ``policy explain``
in :mod:`gateway.app.policy_explain`, ``revoke`` in :mod:`gateway.app.admin_client`, ``audit
verify`` in :mod:`gateway.app.audit_command`) each add their parser with a
``register(subparsers)`` function, imported here like any other module (so
the layer test sees the dependency) and called by :func:`build_parser`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import gateway
from gateway import demo
from gateway.app import admin_client, audit_command, event_loop, policy_explain, serve
from gateway.app.catalog_command import check_lock
from gateway.app.catalog_command import register as register_catalog
from gateway.config import Config, load_config
from gateway.config.issuer import scope_map_warnings
from gateway.config.loader import inspect_config
from gateway.errors import ConfigError
from gateway.observability.logging import configure, get_logger
from gateway.policy import loader as policy_loader
from gateway.policy.issuers import issuer_warnings
from gateway.policy.model import PolicySet
from gateway.policy.overrides import rename_warnings
from gateway.wiring import build_services
from gateway.workers.supervisor import Supervisor
from gateway.workers.worker import EarlyHangup, WorkerSpec, worker_server

__all__ = ["CONFIG_ENV", "SUBCOMMANDS", "build_parser", "main"]

CONFIG_ENV: Final = "MCP_GATEWAY_CONFIG"
"""Environment variable naming the configuration file when ``--config`` is not given."""

Subparsers = Any
"""``argparse._SubParsersAction[argparse.ArgumentParser]`` (a private argparse type)."""

SUBCOMMANDS: Final[tuple[Callable[[Subparsers], None], ...]] = (
    demo.register,
    policy_explain.register,
    admin_client.register,
    audit_command.register,
    register_catalog,
)
"""The subcommands defined beside their layer: each adds its parser and its ``handler``."""

_LOG_FORMATS: Final = ("json", "console")
_LOG_LEVELS: Final = ("debug", "info", "warning", "error")


def _global_options() -> argparse.ArgumentParser:
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


def _config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        "-c",
        metavar="PATH",
        default=os.environ.get(CONFIG_ENV),
        help=f"gateway.yaml to use (default: ${CONFIG_ENV})",
    )


def build_parser() -> argparse.ArgumentParser:
    common = _global_options()
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

    serve = sub.add_parser(
        "serve",
        parents=[common],
        help="run the gateway until SIGTERM/SIGINT",
        description="Serve MCP on `listen` and /healthz, /readyz, /metrics on `ops_listen`.",
    )
    _config_option(serve)
    serve.add_argument(
        "--workers",
        type=_worker_count,
        default=1,
        metavar="N|auto",
        help="worker processes sharing the listeners (SO_REUSEPORT) under a supervisor; auto: "
        "one per CPU this process may run on (default 1: a single process, no supervisor)",
    )
    serve.add_argument(
        "--event-loop",
        choices=("auto", "uvloop", "asyncio"),
        default=None,
        help="the event loop (overrides event_loop; default auto: uvloop when installed)",
    )
    # Set by the supervisor on the workers it starts (gateway/workers/supervisor.py).
    for option, kind in (("slot", int), ("dir", Path), ("port", int), ("parent", int)):
        serve.add_argument(f"--worker-{option}", type=kind, help=argparse.SUPPRESS)
    serve.set_defaults(handler=_cmd_serve)

    check = sub.add_parser(
        "check",
        parents=[common],
        help="validate the configuration and policies, then exit",
        description="Print every problem of the configuration and of the policy files it names "
        "as file:line:col: key.path: message, in one run. Exit 0 when valid, 1 otherwise. "
        "Warnings go to stderr.",
    )
    _config_option(check)
    check.add_argument(
        "--skip-secrets",
        action="store_true",
        help="do not read {env:}/{file:} secret references (lint without production secrets)",
    )
    check.set_defaults(handler=_cmd_check)

    version = sub.add_parser("version", parents=[common], help="print the version")
    version.set_defaults(handler=_cmd_version)

    for register in SUBCOMMANDS:
        register(sub)
    return parser


MAX_WORKERS: Final = 256


def _worker_count(text: str) -> int:
    if text == "auto":
        return max(1, len(os.sched_getaffinity(0)))
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or auto, got {text!r}") from None
    if not 1 <= count <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_WORKERS}")
    return count


# --- commands -------------------------------------------------------------------------------


def _require_config(args: argparse.Namespace) -> Path:
    if not args.config:
        print(
            f"mcp-gateway {args.command}: no configuration: pass --config PATH or set {CONFIG_ENV}",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return Path(args.config)


def _print_problems(problems: Sequence[str], path: Path) -> None:
    for problem in problems:
        print(problem)
    count = len(problems)
    print(f"{path}: {count} problem{'s' if count != 1 else ''}", file=sys.stderr)


def _load_policies(
    paths: Sequence[Path], issuers: Sequence[str]
) -> tuple[list[str], PolicySet | None, tuple[str, ...], PolicySet | None]:
    """Validate the policy files for these issuers' urls: (problems, the policy set or None, the
    files that declare themselves a demo, the set merged from what the files got right even
    with problems)."""
    report = policy_loader.inspect_policy(paths, issuers=issuers)
    if report.problems or report.policy is None:
        return list(report.problems), None, policy_loader.demo_sources(paths), report.policy
    return [], report.policy, report.policy.demo_sources, report.policy


def _policy_warnings(config: Config | None, policy: PolicySet | None) -> list[str]:
    """What the configuration says about the policy that neither can say alone: each issuer's
    ``scope_map`` against the scopes the policy names."""
    if config is None or policy is None:
        return []
    return scope_map_warnings(config.issuers, policy.known_scopes, policy.baseline_scopes)


def _demo_warnings(sources: Sequence[str]) -> list[str]:
    return [
        f"{source}: declares itself a demo policy (demo: true): it grants example tools to "
        "anyone with the demo scopes; do not load it in a deployment"
        for source in sources
    ]


def _unreachable_rules(policy: PolicySet | None, prefixes: Sequence[str] | None) -> list[str]:
    """Rules no configured backend can ever match, renames into another backend's prefix, and
    ``subjects``/``clients`` entries whose issuer is ambiguous or not configured (warnings:
    docs/policy.md)."""
    if policy is None:
        return []
    found = issuer_warnings(policy)
    if prefixes is None:
        return found
    return [*policy.unreachable_rules(prefixes), *rename_warnings(policy, prefixes), *found]


def _cmd_check(args: argparse.Namespace) -> int:
    """Every stage's problems in one run: the configuration's (schema, sections, secrets) and,
    whenever the policy paths could be read, the policy files' too."""
    path = _require_config(args)
    report = inspect_config(path, resolve_secrets=not args.skip_secrets)
    problems = list(report.problems)
    policy = partial = None
    demos: tuple[str, ...] = ()
    if report.policy_paths is not None:
        # partial: what the files got right, for the warnings a mistake must not hide.
        policy_problems, policy, demos, partial = _load_policies(
            report.policy_paths, report.issuer_urls
        )
        problems.extend(policy_problems)
    else:
        print(f"note: {path}: the policy files were not checked (policy: is unreadable)",
              file=sys.stderr)  # fmt: skip
    problems.extend(check_lock(report.config))
    cross = _policy_warnings(report.config, policy)
    unreachable = _unreachable_rules(partial, report.backend_prefixes)
    for warning in (*report.warnings, *cross, *_demo_warnings(demos), *unreachable):
        print(f"warning: {warning}", file=sys.stderr)
    if problems:
        _print_problems(problems, path)
        return 1
    suffix = f" (policy version {policy.version})" if policy is not None else ""
    skipped = " (secrets not read)" if args.skip_secrets else ""
    print(f"{path}: OK{suffix}{skipped}")
    return 0


def _worker_spec(args: argparse.Namespace) -> WorkerSpec | None:
    fields = (args.worker_slot, args.worker_dir, args.worker_port, args.worker_parent)
    if all(field is None for field in fields):
        return None
    if any(field is None for field in fields):
        print("mcp-gateway serve: the --worker-* options go together", file=sys.stderr)
        raise SystemExit(2)
    return WorkerSpec(args.worker_slot, args.worker_dir, args.worker_port, args.worker_parent)


def _log_args(args: argparse.Namespace) -> list[str]:
    """The logging and event-loop options given on this command line (passed on to the
    workers)."""
    found: list[str] = []
    for option in ("log_format", "log_level", "event_loop"):
        if getattr(args, option, None) is not None:
            found += ["--" + option.replace("_", "-"), getattr(args, option)]
    return found


def _cmd_serve(args: argparse.Namespace) -> int:
    spec = _worker_spec(args)
    hangup = EarlyHangup() if spec is not None else None
    if hangup is not None:
        hangup.install()  # first: a SIGHUP from the supervisor must not kill a starting worker
    path = _require_config(args)
    try:
        config = load_config(path)
    except ConfigError as exc:
        _print_problems(exc.problems, path)
        return 1
    problems, policy, demos, _ = _load_policies(config.policy_paths, config.issuer_urls)
    if problems:
        _print_problems(problems, path)
        return 1
    workers = 1 if spec is not None else args.workers
    if workers > 1 and config.audit.sink == "file":
        _print_problems(
            [
                f"{path}: audit.sink: file cannot be shared by {workers} worker processes (each "
                "would rotate the file on its own and lose events); with --workers use "
                "audit.sink: stdout, or run one worker per process"
            ],
            path,
        )
        return 1
    if (
        workers > 1
        and config.state.backend != "redis"
        and any(i.dpop.enabled for i in config.issuers)
    ):
        # SECURITY: each worker would remember only the DPoP proofs it saw, so a proof replayed
        # to another worker of the group would pass (RFC 9449 §11.1).
        _print_problems(
            [
                f"{path}: issuer.dpop needs state.backend: redis with {workers} worker processes "
                "(each would keep its own record of used DPoP proofs, so a proof replayed at "
                "another worker would be accepted); or run one worker per process"
            ],
            path,
        )
        return 1
    configure(
        getattr(args, "log_format", config.logging.format),
        getattr(args, "log_level", config.logging.level),
        static={"worker": spec.slot} if spec is not None else None,
    )
    log = get_logger("gateway.cli")
    if spec is None:  # the supervisor says it once for the group
        cross = _policy_warnings(config, policy)
        for warning in (*config.warnings, *cross, *_demo_warnings(demos)):
            log.warning("config.warning", detail=warning)
    if workers > 1:
        supervisor = Supervisor(
            config, config_path=path, workers=workers, worker_args=_log_args(args)
        )
        try:
            return asyncio.run(supervisor.run())
        except OSError as exc:
            return _bind_failed(exc)
    try:
        # A worker's connections are spread by the kernel: a session could not stay on it.
        services = build_services(config, legacy_sessions=spec is None)
    except ConfigError as exc:  # e.g. the policy changed between validation and assembly
        _print_problems(exc.problems, path)
        return 1
    except OSError as exc:  # e.g. the audit file cannot be opened
        log.error("gateway.startup_failed", error=exc.__class__.__name__, detail=exc.strerror)
        return 1
    server = None
    if spec is not None and hangup is not None:
        server = worker_server(config, services, spec, hangup)
    try:
        event_loop.run(serve(config, services, server=server), args.event_loop or config.event_loop)
    except event_loop.UvloopMissing as exc:
        log.error("gateway.startup_failed", error="UvloopMissing", detail=str(exc))
        return 1
    except OSError as exc:
        return _bind_failed(exc)
    return 0


def _bind_failed(exc: OSError) -> int:
    get_logger("gateway.cli").error(
        "gateway.bind_failed", error=exc.__class__.__name__, errno=exc.errno, detail=exc.strerror
    )
    return 1


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


if __name__ == "__main__":
    sys.exit(main())
