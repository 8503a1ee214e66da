"""The group's ops listener (``ops_listen``) of ``serve --workers N``, served by the supervisor.

Same paths as a single gateway's ops listener, answered for the whole process group by asking
every worker on its private socket (:class:`WorkerLink`):

* ``/healthz``: 200 while every running worker answers its own ``/healthz`` within
  :data:`PROBE_TIMEOUT_S`; a restarting worker does not count against it, neither while it
  waits for its restart nor while its new process boots (it has not answered yet, for up to
  :data:`BOOT_GRACE_S`); 503 names the worker that did not answer;
* ``/readyz``: 200 only when every worker slot has a running worker whose ``/readyz`` is
  ready; 503 ``draining`` from the first SIGTERM; the body lists each worker;
* ``/metrics``: the workers' registries merged (:mod:`gateway.observability.group_metrics`);
* ``POST /admin/revoke`` (with ``admin.token``): the same API, carried out on every worker
  (:class:`GroupRevocations`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import aiohttp
from aiohttp import web

from gateway.app.admin import add_admin_routes
from gateway.app.request_id import echo_request_id, request_id_middleware
from gateway.backend.credentials.assertion_keys import GatewayKeys
from gateway.config import Config
from gateway.http.pipeline.routes import add_jwks_route, ops_jwks
from gateway.jsonkit.read import loads
from gateway.jsonkit.write import compact
from gateway.observability.audit import AuditSink
from gateway.observability.group_metrics import OPENMETRICS, GroupMetrics, parse_exposition
from gateway.observability.logging import get_logger
from gateway.outbound.client import Destination, Outbound
from gateway.outbound.failures import OutboundConnectionError, OutboundError
from gateway.state.revocation import MAX_LOCAL
from gateway.workers.runtime import write_revocations
from gateway.workers.slot import Slot
from gateway.workers.worker import ADOPT_PATH, REVOKE_PATH

__all__ = [
    "BOOT_GRACE_S",
    "PROBE_TIMEOUT_S",
    "SCRAPE_TIMEOUT_S",
    "Group",
    "GroupRevocations",
    "WorkerLink",
    "build_group_ops_app",
]

PROBE_TIMEOUT_S: Final = 0.5
"""A worker's answer to /healthz or /readyz (below the probes' own timeouts)."""
BOOT_GRACE_S: Final = 60.0
"""How long a new worker process that has not answered a probe yet counts as restarting (it is
importing, loading the configuration and binding); after that, as unresponsive."""
SCRAPE_TIMEOUT_S: Final = 2.0
"""A worker's /metrics; one that does not answer in time contributes its previous scrape."""
REVOKE_TIMEOUT_S: Final = 3.0
_MAX_ANSWER: Final = 16 * 1024 * 1024
_NO_STORE: Final = {"Cache-Control": "no-store"}

log = get_logger("gateway.workers")


class WorkerLink:
    """HTTP to one slot's private ops socket (through :mod:`gateway.outbound`)."""

    def __init__(self, outbound: Outbound, slot: Slot) -> None:
        self.slot = slot
        self.answered_pid: int | None = None
        """The last process of the slot that answered a probe (so it has booted)."""
        self._outbound = outbound
        self._destination = f"worker-{slot.index}"
        outbound.add(
            Destination(
                self._destination,
                connect_timeout_s=PROBE_TIMEOUT_S,
                max_connections=8,
                unix_socket=slot.socket_path,
            )
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        timeout_s: float,
        doc: Mapping[str, Any] | None = None,
        accept: str = "application/json",
    ) -> tuple[int, bytes]:
        headers = {"Accept": accept}
        body = None
        if doc is not None:
            headers["Content-Type"] = "application/json"
            body = compact(doc)
        response = await self._outbound.request(
            self._destination,
            method,
            f"http://worker{path}",
            timeout_s=timeout_s,
            headers=headers,
            body=body,
            max_body=_MAX_ANSWER,
        )
        return response.status, response.body

    async def probe(self, path: str) -> tuple[int, dict[str, Any]] | None:
        """(status, JSON body) of a probe path, None when the worker did not answer."""
        pid = self.slot.pid
        try:
            status, body = await self.request("GET", path, timeout_s=PROBE_TIMEOUT_S)
            doc = loads(body)
        except (OutboundError, ValueError):
            return None
        self.answered_pid = pid
        return status, doc if isinstance(doc, dict) else {}

    def booting(self, now: float | None = None) -> bool:
        """The slot's process was started, has not answered a probe yet, within the grace."""
        pid = self.slot.pid
        now = time.monotonic() if now is None else now
        return (
            pid is not None
            and pid != self.answered_pid
            and now - self.slot.started_at < BOOT_GRACE_S
        )


class Group:
    """What the group's ops listener knows: the slots, their links, the group's metrics."""

    def __init__(
        self, config: Config, slots: Sequence[Slot], outbound: Outbound, metrics: GroupMetrics
    ) -> None:
        self.config = config
        self.slots = list(slots)
        self.links = [WorkerLink(outbound, slot) for slot in self.slots]
        self.metrics = metrics
        self.draining = False
        self.ever_ready = False

    def running(self) -> list[tuple[WorkerLink, int]]:
        return [(link, pid) for link in self.links if (pid := link.slot.pid) is not None]

    async def scrape(self) -> None:
        """Refresh every running worker's families in :attr:`metrics` (concurrently)."""

        async def one(link: WorkerLink, pid: int) -> None:
            try:
                status, body = await link.request(
                    "GET", "/metrics", timeout_s=SCRAPE_TIMEOUT_S, accept=OPENMETRICS
                )
                families = parse_exposition(body.decode()) if status == 200 else None
            except (OutboundError, ValueError, UnicodeDecodeError):
                families = None
            if families is None:
                log.warning("worker.scrape_failed", worker=link.slot.index, pid=pid)
            elif link.slot.pid == pid:  # still the same process: not retired meanwhile
                self.metrics.update(str(pid), families)

        running = self.running()
        self.metrics.workers_running.set(len(running))
        await asyncio.gather(*(one(link, pid) for link, pid in running))


class GroupRevocations:
    """``POST /admin/revoke`` for the group.

    Every revocation (a revocation key) is remembered here (until the later of
    ``admin.revocation_ttl_s`` and the instant the admin API asks for: a JWT's ``exp``), written
    to the runtime directory's ``revocations.json`` (read by each worker right after it binds,
    so a worker started later has it), and sent to every running worker (``/worker/revocations``).
    A worker whose socket refuses the connection has not bound yet and reads the file. With
    ``state.backend: redis`` one worker also revokes through Redis (``/worker/revoke``), which
    reaches every other replica. ``shared`` is False when a running worker or Redis did not take
    it (the admin API answers 503: retry, it is idempotent).
    """

    def __init__(self, group: Group, runtime_dir: Path, *, clock: Any = time.time) -> None:
        self._group = group
        self._runtime_dir = runtime_dir
        self._clock = clock
        self._ttl_s = group.config.admin.revocation_ttl_s
        self._redis = group.config.state.backend == "redis"
        self.revoked: dict[bytes, float] = {}

    async def revoke(self, digest: bytes, at_least: float = 0.0) -> tuple[float, bool]:
        now = self._clock()
        until = max(now + self._ttl_s, at_least, self.revoked.get(digest, 0.0))
        self.revoked = {d: end for d, end in self.revoked.items() if end > now}
        self.revoked[digest] = until
        while len(self.revoked) > MAX_LOCAL:  # as a worker's own list: the soonest ending go
            del self.revoked[min(self.revoked, key=self.revoked.__getitem__)]
        # Before any await: a worker reading the file from now on sees this revocation.
        write_revocations(self._runtime_dir, self.revoked)
        running = [link for link, _ in self._group.running()]
        shared = True
        if self._redis:
            shared = await self._through_redis(running, digest, until)
        delivered = await asyncio.gather(*(self._deliver(link, digest, until) for link in running))
        return until, shared and all(delivered)

    async def _deliver(self, link: WorkerLink, digest: bytes, until: float) -> bool:
        doc = {"revocations": [[digest.hex(), until]]}
        try:
            status, _ = await link.request("POST", ADOPT_PATH, timeout_s=REVOKE_TIMEOUT_S, doc=doc)
        except OutboundConnectionError as exc:
            if isinstance(exc.__cause__, aiohttp.ClientConnectorError):
                return True  # not bound yet: it reads revocations.json right after binding
            status = 0
        except OutboundError:
            status = 0
        if status != 200:
            log.error("worker.revocation_not_delivered", worker=link.slot.index)
        return status == 200

    async def _through_redis(
        self, running: Sequence[WorkerLink], digest: bytes, until: float
    ) -> bool:
        for link in running:
            try:
                status, body = await link.request(
                    "POST", REVOKE_PATH, timeout_s=REVOKE_TIMEOUT_S,
                    doc={"revocation_key": digest.hex(), "until": until},
                )  # fmt: skip
                answer = loads(body)
            except (OutboundError, ValueError):
                continue
            if status == 200 and isinstance(answer, dict):
                return answer.get("shared") is True
        return False


def _answer(status: int, body: dict[str, Any]) -> web.Response:
    return web.json_response(body, status=status, headers=_NO_STORE)


def _worker_entry(link: WorkerLink, pid: int | None, status: str) -> dict[str, Any]:
    return {"worker": link.slot.index, "pid": pid, "status": status}


def build_group_ops_app(
    group: Group, revocations: GroupRevocations, audit: AuditSink | None
) -> web.Application:
    config = group.config
    app = web.Application(
        middlewares=[request_id_middleware(trusted_proxies=config.trusted_proxies)]
    )
    app.on_response_prepare.append(echo_request_id)

    async def healthz(request: web.Request) -> web.Response:
        running = group.running()
        # The slots without a process, from the same snapshot: a slot whose new process starts
        # while the probes are out must still be listed once (as restarting), not dropped.
        idle = [link for link in group.links if all(link is not seen for seen, _ in running)]
        answers = await asyncio.gather(*(link.probe("/healthz") for link, _ in running))
        workers = [_worker_entry(link, None, "restarting") for link in idle]
        alive = True
        for (link, pid), answer in zip(running, answers, strict=True):
            ok = answer is not None and answer[0] == 200
            if not ok and answer is None and link.booting():
                workers.append(_worker_entry(link, pid, "restarting"))
                continue  # docs/operations.md: a restarting worker does not count against it
            alive = alive and ok
            workers.append(_worker_entry(link, pid, "alive" if ok else "unresponsive"))
        workers.sort(key=lambda entry: int(entry["worker"]))
        return _answer(
            200 if alive else 503,
            {"status": "alive" if alive else "unresponsive", "workers": workers},
        )

    async def readyz(request: web.Request) -> web.Response:
        if group.draining:
            stopping = [_worker_entry(link, link.slot.pid, "draining") for link in group.links]
            return _answer(503, {"status": "draining", "checks": {}, "workers": stopping})
        pids = [link.slot.pid for link in group.links]
        answers = await asyncio.gather(
            *(link.probe("/readyz") if pid is not None else _none() for link, pid in
              zip(group.links, pids, strict=True))
        )  # fmt: skip
        workers: list[dict[str, Any]] = []
        checks: dict[str, bool] = {}
        versions: set[Any] = set()
        backends: list[Any] = []
        issuers: list[Any] = []
        state: Any = None
        ready = True
        for link, pid, answer in zip(group.links, pids, answers, strict=True):
            body: dict[str, Any]
            if pid is None or (answer is None and link.booting()):
                status, body = "restarting", {}
            elif answer is None:
                status, body = "unresponsive", {}
            else:
                body = answer[1]
                status = str(body.get("status", "unknown"))
            ready = ready and status == "ready"
            for name, value in (body.get("checks") or {}).items():
                checks[str(name)] = checks.get(str(name), True) and value is True
            versions.add(body.get("policy_version"))
            if answer is not None:
                backends.append(body.get("backends"))
                issuers.append(body.get("issuers"))
            if state is None:
                state = body.get("state")
            entry = _worker_entry(link, pid, status)
            entry["policy_version"] = body.get("policy_version")
            workers.append(entry)
        group.ever_ready = group.ever_ready or ready
        overall = "ready" if ready else "not_ready" if group.ever_ready else "starting"
        doc: dict[str, Any] = {
            "status": overall,
            "checks": checks,
            # One version when every worker runs the same policy; None while they differ.
            "policy_version": versions.pop() if len(versions) == 1 else None,
            "workers": workers,
        }
        if any(isinstance(report, dict) for report in backends):
            doc["backends"] = merge_backend_reports(backends, len(group.links))
        if any(isinstance(report, list) for report in issuers):
            doc["issuers"] = merge_issuer_reports(issuers, len(group.links))
        if state is not None:
            doc["state"] = state
        return _answer(200 if ready else 503, doc)

    async def metrics(request: web.Request) -> web.Response:
        await group.scrape()
        payload, content_type = group.metrics.exposition(request.headers.get("Accept"))
        return web.Response(body=payload, headers={"Content-Type": content_type, **_NO_STORE})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    add_admin_routes(app, config, revocations.revoke, audit)
    keys = GatewayKeys.from_config(config)  # the same files the workers sign with
    # The checkpoint key too (the workers sign their chains with it): audit verify --jwks.
    checkpoint = audit.checkpoint_jwk if audit is not None else None
    jwks = ops_jwks(keys.jwks if keys.enabled else None, checkpoint)
    if jwks is not None:
        add_jwks_route(app, jwks)
    return app


_WORST: Final[dict[str, Any]] = {
    "tools": min, "hidden": max, "override_refused": max, "catalog_age_s": max,
}  # fmt: skip


def merge_backend_reports(reports: Sequence[Any], workers: int) -> dict[str, Any]:
    """The workers' ``backends`` reports as one: a backend is ``ready`` only when it is on every
    worker; ``era`` when the workers agree (else None); the fewest ``tools``, the most
    ``hidden`` and ``override_refused``, the oldest ``catalog_age_s``, the ``catalog_lock`` of
    the worker holding the most."""
    per_backend: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        for name, entry in (report if isinstance(report, dict) else {}).items():
            if isinstance(entry, dict):
                per_backend.setdefault(str(name), []).append(entry)
    merged: dict[str, Any] = {}
    for name, entries in per_backend.items():
        one: dict[str, Any] = dict(entries[0])
        one["ready"] = len(entries) == workers and all(e.get("ready") is True for e in entries)
        eras = {e.get("era") for e in entries}
        one["era"] = eras.pop() if len(eras) == 1 else None
        for key, pick in _WORST.items():
            values = [e[key] for e in entries if isinstance(e.get(key), int | float)]
            if values:
                one[key] = pick(values)
        locks = [e["catalog_lock"] for e in entries if isinstance(e.get("catalog_lock"), dict)]
        if locks:  # the worker holding the most (each watches the lock and fetches on its own)
            one["catalog_lock"] = max(locks, key=lambda lock: lock.get("held", 0))
        merged[name] = one
    return merged


def merge_issuer_reports(reports: Sequence[Any], workers: int) -> list[dict[str, Any]]:
    """The workers' ``issuers`` reports as one, in the configured order: an issuer is
    ``ready`` only when it is on every worker; the first ``reason`` a worker gives; the fewest
    ``keys``."""
    per_issuer: dict[str, list[dict[str, Any]]] = {}
    for report in reports:
        for entry in report if isinstance(report, list) else ():
            if isinstance(entry, dict):
                per_issuer.setdefault(str(entry.get("url")), []).append(entry)
    merged: list[dict[str, Any]] = []
    for entries in per_issuer.values():
        one = dict(entries[0])
        one["ready"] = len(entries) == workers and all(e.get("ready") is True for e in entries)
        reason = next((e["reason"] for e in entries if e.get("reason") is not None), None)
        one.pop("reason", None)
        if reason is not None:
            one["reason"] = reason
        keys = [e["keys"] for e in entries if isinstance(e.get("keys"), int)]
        if keys:
            one["keys"] = min(keys)
        merged.append(one)
    return merged


async def _none() -> None:
    return None
