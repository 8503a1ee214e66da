"""``mcp-gateway serve``: run the gateway until SIGTERM/SIGINT.

One process by default; with ``--workers N`` a supervisor (:mod:`gateway.workers`) starts N
worker processes, each this same command with the hidden ``--worker-*`` options. The services
come from :func:`gateway.wiring.build_services`. Exit 1 for an invalid configuration or policy, a
listener that cannot bind or (``--workers N``) a worker that had to be killed at the end of the
stop; 3 when a worker kept crashing (:mod:`gateway.workers.slot`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Final

from gateway.app import event_loop, serve
from gateway.commands.check import demo_warnings, load_policies, policy_warnings
from gateway.commands.options import (
    Subparsers,
    add_config_option,
    logging_options,
    print_problems,
    require_config,
)
from gateway.config import load_config
from gateway.errors import ConfigError
from gateway.observability.logging import configure, get_logger
from gateway.wiring.production import build_services
from gateway.workers.supervisor import Supervisor
from gateway.workers.worker import EarlyHangup, WorkerSpec, worker_server

__all__ = ["MAX_WORKERS", "register"]

MAX_WORKERS: Final = 256


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "serve",
        parents=[logging_options()],
        help="run the gateway until SIGTERM/SIGINT",
        description="Serve MCP on `listen` and /healthz, /readyz, /metrics on `ops_listen`.",
    )
    add_config_option(parser)
    parser.add_argument(
        "--workers",
        type=_worker_count,
        default=1,
        metavar="N|auto",
        help="worker processes sharing the listeners (SO_REUSEPORT) under a supervisor; auto: "
        "one per CPU this process may run on (default 1: a single process, no supervisor)",
    )
    parser.add_argument(
        "--event-loop",
        choices=("auto", "uvloop", "asyncio"),
        default=None,
        help="the event loop (overrides event_loop; default auto: uvloop when installed)",
    )
    # Set by the supervisor on the workers it starts (gateway/workers/supervisor.py).
    for option, kind in (("slot", int), ("dir", Path), ("port", int), ("parent", int)):
        parser.add_argument(f"--worker-{option}", type=kind, help=argparse.SUPPRESS)
    parser.set_defaults(handler=_cmd_serve)


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
    path = require_config(args)
    try:
        config = load_config(path)
    except ConfigError as exc:
        print_problems(exc.problems, path)
        return 1
    problems, policy, demos, _ = load_policies(
        config.policy_paths, config.issuer_urls, [g.name for g in config.guardrails]
    )
    if problems:
        print_problems(problems, path)
        return 1
    workers = 1 if spec is not None else args.workers
    if workers > 1 and config.audit.sink == "file":
        print_problems(
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
        print_problems(
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
        cross = policy_warnings(config, policy)
        for warning in (*config.warnings, *cross, *demo_warnings(demos)):
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
        print_problems(exc.problems, path)
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
