"""The supervisor of ``mcp-gateway serve --workers N`` (N > 1).

It reserves the public port (``SO_REUSEPORT``; with ``listen.port: 0`` the kernel picks it),
starts N worker processes (``python -m gateway.commands serve`` with hidden worker options,
:mod:`gateway.workers.worker`) in their own process group, serves the group's ops listener
(:mod:`gateway.workers.group_ops`) and:

* **SIGTERM / SIGINT**: the group's ``/readyz`` turns 503 at once and every worker gets
  SIGTERM, so each runs the usual graceful stop (503 ``/readyz``, serve on for
  ``limits.shutdown_delay_s``, stop accepting, drain ``limits.drain_timeout_s``); a second
  signal is forwarded too (it ends the workers' shutdown delay). A worker still running after
  the delay, the drain and :data:`STOP_MARGIN_S` is killed. The ops listener closes last.
* **SIGHUP**: forwarded to every worker: each reloads the policy.
* **A worker that exits unexpectedly** is restarted after a back-off; a slot that keeps
  dying (:mod:`gateway.workers.slot`) makes the supervisor stop the others and exit
  :data:`EXIT_WORKERS_DYING`.

Workers run in their own process group so a terminal's Ctrl-C reaches only the supervisor
(which forwards it once); under systemd use ``KillMode=mixed`` for the same reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import gateway
from gateway.app.connection_limits import ListenerLimits
from gateway.app.lifecycle import CANCEL_GRACE_S, bind_tcp
from gateway.config import Config
from gateway.observability.audit import AuditSink
from gateway.observability.group_metrics import GroupMetrics
from gateway.observability.logging import get_logger
from gateway.outbound.client import Outbound
from gateway.workers.group import Group, GroupRevocations
from gateway.workers.group_ops import build_group_ops_app
from gateway.workers.runtime import socket_path, write_revocations
from gateway.workers.slot import DEFAULT_RESTART_POLICY, RestartPolicy, Slot

__all__ = ["EXIT_WORKERS_DYING", "STOP_MARGIN_S", "Supervisor", "reserve_port"]

EXIT_WORKERS_DYING: Final = 3
"""The supervisor's exit status when a worker kept crashing."""
EXIT_KILLED: Final = 1
"""A worker had to be killed at the end of the stop (it outlived its drain)."""
STOP_MARGIN_S: Final = 5.0
"""Beyond a worker's own stop bound (shutdown delay + drain + grace), for its cleanups."""

log = get_logger("gateway.workers")


def reserve_port(host: str, port: int) -> tuple[list[socket.socket], int]:
    """Bind (without listening) one ``SO_REUSEPORT`` socket per address of ``host``, as the
    workers will: it reserves the port for the group while workers come and go (and picks it
    when ``port`` is 0). Raises OSError when it cannot bind, also when another process holds
    the port with ``SO_REUSEPORT`` (a second group on the same port would silently share its
    connections)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    chosen = port
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            if chosen:
                _probe(family, kind, proto, (address[0], chosen, *address[2:]))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address[0], chosen, *address[2:]))
            chosen = int(sock.getsockname()[1])
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets, chosen


def _probe(family: int, kind: int, proto: int, address: tuple[object, ...]) -> None:
    """Bind without SO_REUSEPORT: EADDRINUSE when anyone holds the port (SO_REUSEADDR: a
    connection in TIME_WAIT does not count)."""
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        probe.bind(address)


def _exit_fields(code: int | None) -> dict[str, object]:
    if code is None:
        return {"exit_code": None}
    if code < 0:
        with contextlib.suppress(ValueError):
            return {"signal": signal.Signals(-code).name}
    return {"exit_code": code}


class Supervisor:
    """Runs the group until a stop signal or a worker that keeps dying (:meth:`run`)."""

    def __init__(
        self,
        config: Config,
        *,
        config_path: Path,
        workers: int,
        worker_args: Sequence[str] = (),
        restart_policy: RestartPolicy = DEFAULT_RESTART_POLICY,
    ) -> None:
        self.config = config
        self.count = workers
        self._config_path = config_path.resolve()
        self._worker_args = list(worker_args)
        self._policy = restart_policy
        self._stop = asyncio.Event()
        self._gave_up = False
        self._signals = 0
        self._slots: list[Slot] = []
        self.port = 0

    async def run(self) -> int:
        """Serve until stopped; the exit status (0, :data:`EXIT_KILLED`,
        :data:`EXIT_WORKERS_DYING`). Raises OSError when a listener cannot bind."""
        config = self.config
        runtime_dir = Path(tempfile.mkdtemp(prefix="mcp-gateway-"))
        reserved: list[socket.socket] = []
        outbound = Outbound(user_agent=f"mcp-resource-gateway/{gateway.__version__}")
        audit: AuditSink | None = None
        ops_runner = None
        loop = asyncio.get_running_loop()
        handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        for sig in handled:
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            reserved, self.port = reserve_port(config.listen.host, config.listen.port)
            write_revocations(runtime_dir, {})
            slots = self._slots = [
                Slot(i, str(socket_path(runtime_dir, i)), self._policy) for i in range(self.count)
            ]
            metrics = GroupMetrics(self.count, gateway.__version__)
            group = Group(config, slots, outbound, metrics)
            audit = AuditSink.from_config(config.audit)
            revocations = GroupRevocations(group, runtime_dir)
            ops_runner, ops_port = await bind_tcp(
                build_group_ops_app(group, revocations, audit),
                config.ops_listen,
                ListenerLimits.from_config(config),
                metrics.listener,
            )
            log.info(
                "supervisor.started",
                workers=self.count,
                pid=os.getpid(),
                mcp_port=self.port,
                ops=f"{config.ops_listen.host}:{ops_port}",
                runtime_dir=str(runtime_dir),
                version=gateway.__version__,
            )
            keepers = [
                asyncio.create_task(self._keep(slot, runtime_dir, metrics)) for slot in slots
            ]
            await self._stop.wait()
            return await self._stop_all(group, keepers)
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)
            if ops_runner is not None:
                await ops_runner.cleanup()
            await outbound.close()
            if audit is not None:
                audit.close()
            for sock in reserved:
                sock.close()
            shutil.rmtree(runtime_dir, ignore_errors=True)

    # --- signals ---------------------------------------------------------------------------

    def _on_signal(self, sig: signal.Signals) -> None:
        if sig == signal.SIGHUP:
            pids = self._send(signal.SIGHUP)
            log.info("supervisor.reload_forwarded", workers=pids)
            return
        self._signals += 1
        if self._signals == 1:
            log.info("supervisor.signal", signal=sig.name)
        else:
            # A second signal: forward it as well (the workers end their shutdown delay).
            self._send(signal.SIGTERM)
        self._begin_stop()

    def _begin_stop(self) -> None:
        self._stop.set()  # checked by every keeper before it (re)starts a worker

    def _send(self, sig: signal.Signals) -> list[int]:
        sent = []
        for slot in self._slots:
            process, pid = slot.process, slot.pid
            if process is not None and pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(sig)
                    sent.append(pid)
        return sent

    # --- workers ---------------------------------------------------------------------------

    def _command(self, slot: Slot, runtime_dir: Path) -> list[str]:
        command = [sys.executable, "-m", "gateway.commands", "serve"]
        worker = {
            "--worker-slot": slot.index,
            "--worker-dir": runtime_dir,
            "--worker-port": self.port,
            "--worker-parent": os.getpid(),
        }
        options = [str(part) for pair in worker.items() for part in pair]
        return [*command, "--config", str(self._config_path), *self._worker_args, *options]

    async def _keep(self, slot: Slot, runtime_dir: Path, metrics: GroupMetrics) -> None:
        """Run slot's worker, restarting it after an unexpected exit, until the stop."""
        while not self._stop.is_set():
            code: int | None = None
            pid: int | None = None
            try:
                process = await asyncio.create_subprocess_exec(
                    *self._command(slot, runtime_dir),
                    stdin=asyncio.subprocess.DEVNULL,
                    process_group=0,  # a terminal's Ctrl-C is for the supervisor only
                )
            except OSError as exc:
                log.error("worker.spawn_failed", worker=slot.index, detail=exc.strerror)
            else:
                slot.process, slot.started_at, pid = process, time.monotonic(), process.pid
                log.info("worker.started", worker=slot.index, pid=pid)
                if self._stop.is_set():  # the stop began while it was spawning
                    with contextlib.suppress(ProcessLookupError):
                        process.send_signal(signal.SIGTERM)
                code = await process.wait()
                metrics.retire(str(pid))
            if self._stop.is_set():
                log.info("worker.stopped", worker=slot.index, pid=pid, **_exit_fields(code))
                return
            delay = slot.record_crash()
            if delay is None:
                log.error(
                    "supervisor.workers_keep_dying",
                    worker=slot.index,
                    pid=pid,
                    crashes=len(slot.crashes),
                    window_s=self._policy.window_s,
                    **_exit_fields(code),
                )
                self._gave_up = True
                self._begin_stop()
                return
            metrics.worker_restarts_total.inc()
            log.error(
                "worker.exited",
                worker=slot.index,
                pid=pid,
                restart_in_s=delay,
                **_exit_fields(code),
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), delay)

    async def _stop_all(self, group: Group, keepers: list[asyncio.Task[None]]) -> int:
        group.draining = True
        started = time.monotonic()
        limits = self.config.limits
        log.info(
            "supervisor.draining",
            workers=[slot.pid for slot in self._slots if slot.pid is not None],
            shutdown_delay_s=limits.shutdown_delay_s,
            drain_timeout_s=limits.drain_timeout_s,
        )
        self._send(signal.SIGTERM)
        bound = limits.shutdown_delay_s + limits.drain_timeout_s + CANCEL_GRACE_S + STOP_MARGIN_S
        _, pending = await asyncio.wait(keepers, timeout=bound)
        killed = self._send(signal.SIGKILL) if pending else []
        if pending:
            log.error("supervisor.workers_killed", workers=killed, after_s=bound)
            await asyncio.wait(pending, timeout=5.0)
        status = EXIT_WORKERS_DYING if self._gave_up else EXIT_KILLED if killed else 0
        log.info(
            "supervisor.stopped",
            exit_code=status,
            duration_ms=round((time.monotonic() - started) * 1000, 2),
        )
        return status
