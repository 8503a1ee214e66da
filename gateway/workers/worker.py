"""A worker process of ``serve --workers N``: the whole gateway, bound the group's way.

A worker is ``mcp-gateway serve`` with three differences (:func:`worker_server`):

* its public listener binds the port the supervisor reserved, with ``SO_REUSEPORT``, so the
  kernel spreads new connections over the workers;
* its ops listener is private, on ``<runtime dir>/worker-<slot>.sock`` (the supervisor serves
  the group's ``ops_listen``), with ``/healthz``, ``/readyz``, ``/metrics`` and routes for
  the supervisor: ``POST /worker/revocations`` (apply revocations the supervisor fans out),
  ``POST /worker/revoke`` (revoke through this worker's shared state: Redis) and, with a
  ``user_oauth`` backend, ``POST /worker/upstream-tokens/list`` and ``.../purge`` (this worker's
  view of the stored upstream tokens: :mod:`gateway.app.admin_upstream`);
* it reads the supervisor's revocations right after binding, stops gracefully when the
  supervisor disappears (its parent pid changes), and never dies of a SIGHUP that arrives
  before its reload handler is installed (the reload is done once it is).

Its log lines carry ``worker`` (the slot).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any, Final

from aiohttp import web

from gateway.app import SERVICES, GatewayServer, Services, build_ops_app
from gateway.app.admin_upstream import add_worker_upstream_routes
from gateway.app.lifecycle import PUBLIC_READY_WAIT_S
from gateway.config import Config
from gateway.jsonkit.read import loads
from gateway.observability.logging import get_logger
from gateway.workers.runtime import read_revocations, socket_path

__all__ = [
    "ADOPT_PATH",
    "PARENT_POLL_S",
    "REVOKE_PATH",
    "EarlyHangup",
    "WorkerSpec",
    "build_worker_ops_app",
    "worker_server",
]

ADOPT_PATH: Final = "/worker/revocations"
REVOKE_PATH: Final = "/worker/revoke"
PARENT_POLL_S: Final = 1.0
"""How often a worker checks that its supervisor is still its parent."""

log = get_logger("gateway.workers")


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What the supervisor tells a worker (hidden ``serve`` options)."""

    slot: int
    runtime_dir: Path
    port: int
    parent: int
    """The supervisor's pid (the worker's parent at start)."""

    @property
    def ops_socket(self) -> str:
        return str(socket_path(self.runtime_dir, self.slot))


class EarlyHangup:
    """Notes a SIGHUP that arrives before the policy reload handler is installed (the default
    action would kill the worker; ignoring it would lose a reload the operator asked for)."""

    def __init__(self) -> None:
        self.pending = False

    def install(self) -> None:
        signal.signal(signal.SIGHUP, self._note)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.pending = True


def _bad_request(text: str) -> web.Response:
    return web.json_response({"error": "invalid_request", "error_description": text}, status=400)


async def _document(request: web.Request) -> dict[str, Any] | None:
    try:
        doc = loads(await request.read())
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


async def _adopt(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    doc = await _document(request)
    entries = doc.get("revocations") if doc is not None else None
    if services.adopt_revocation is None or not isinstance(entries, list):
        return _bad_request('expected {"revocations": [[sha256 hex, until], ...]}')
    adopted = 0
    for entry in entries:
        try:
            member, until = entry
            digest = bytes.fromhex(member)
            applied = services.adopt_revocation(digest, float(until))
        except (TypeError, ValueError):
            return _bad_request("malformed revocation")
        if applied:
            adopted += 1
            log.info("token_revocation_applied", token_fp=member[:12], source="supervisor")
    return web.json_response({"adopted": adopted})


async def _revoke(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    doc = await _document(request)
    member = doc.get("revocation_key") if doc is not None else None
    at_least = doc.get("until", 0.0) if doc is not None else 0.0
    if (
        services.revoke is None
        or not isinstance(member, str)
        or isinstance(at_least, bool)
        or not isinstance(at_least, int | float)
    ):
        return _bad_request('expected {"revocation_key": hex, "until": unix time}')
    try:
        digest = bytes.fromhex(member)
        until, shared = await services.revoke(digest, float(at_least))
    except ValueError:
        return _bad_request("malformed digest")
    return web.json_response({"until": until, "shared": shared})


def build_worker_ops_app(config: Config, services: Services) -> web.Application:
    """The private ops app: the usual probes and metrics, no admin API, the worker routes."""
    app = build_ops_app(config, services, admin=False)
    app.router.add_post(ADOPT_PATH, _adopt)
    app.router.add_post(REVOKE_PATH, _revoke)
    if services.upstream_tokens is not None:
        add_worker_upstream_routes(app, services.upstream_tokens)
    return app


def _adopt_file(spec: WorkerSpec, services: Services) -> None:
    if services.adopt_revocation is None:
        return
    revoked = read_revocations(spec.runtime_dir)
    for digest, until in revoked.items():
        services.adopt_revocation(digest, until)
    if revoked:
        log.info("token_revocations_synced", revocations=len(revoked), source="supervisor")


async def _watch_parent(parent: int) -> None:
    while True:
        await asyncio.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            # The supervisor died without stopping us: stop the normal graceful way.
            log.error("worker.supervisor_gone", supervisor_pid=parent)
            os.kill(os.getpid(), signal.SIGTERM)
            return


async def _catch_up_hangup(hangup: EarlyHangup, services: Services) -> None:
    # Runs after the wiring's SIGHUP handler is installed (background tasks start in order), so
    # a SIGHUP is either noted here or reloads through that handler.
    if hangup.pending and services.reload_policy is not None:
        hangup.pending = False
        with contextlib.suppress(Exception):  # the reloader reports its own failures
            await asyncio.get_running_loop().run_in_executor(None, services.reload_policy)


def worker_server(
    config: Config, services: Services, spec: WorkerSpec, hangup: EarlyHangup
) -> GatewayServer:
    """The :class:`GatewayServer` of worker ``spec.slot``."""
    services.after_bind.append(lambda: _adopt_file(spec, services))
    services.background.append(lambda: _catch_up_hangup(hangup, services))
    services.background.append(lambda: _watch_parent(spec.parent))
    return GatewayServer(
        replace(config, listen=replace(config.listen, port=spec.port)),
        services,
        ops_socket=spec.ops_socket,
        ops_app=build_worker_ops_app,
        reuse_port=True,
        public_when_ready_s=PUBLIC_READY_WAIT_S,
        log_fields={"worker": spec.slot, "pid": os.getpid()},
    )
