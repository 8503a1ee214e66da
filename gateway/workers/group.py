"""The worker group as the supervisor's ops listener reaches it (``serve --workers N``).

:class:`WorkerLink`: HTTP to one slot's private ops socket, and whether its process is still
booting; :class:`Group`: the slots, their links and the merged metrics (scraped from every
running worker); :class:`GroupRevocations`: ``POST /admin/revoke`` carried to every worker, the
runtime directory's file and, with Redis, the other replicas; :class:`GroupUpstreamTokens`:
``POST /admin/upstream-tokens/*`` asked of one worker (Redis) or every worker (memory). The
answers of the group's ops listener built on these: :mod:`gateway.workers.group_ops`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import aiohttp

from gateway.app.admin_upstream import WORKER_LIST_PATH, WORKER_PURGE_PATH, selection_doc
from gateway.config import Config
from gateway.jsonkit.read import loads
from gateway.jsonkit.write import compact
from gateway.observability.group_metrics import OPENMETRICS, GroupMetrics, parse_exposition
from gateway.observability.logging import get_logger
from gateway.outbound.client import Destination, Outbound
from gateway.outbound.failures import OutboundConnectionError, OutboundError
from gateway.state.revocation import MAX_LOCAL
from gateway.state.store import StoreUnavailable
from gateway.workers.runtime import write_revocations
from gateway.workers.slot import Slot
from gateway.workers.worker import ADOPT_PATH, REVOKE_PATH

__all__ = [
    "BOOT_GRACE_S",
    "PROBE_TIMEOUT_S",
    "SCRAPE_TIMEOUT_S",
    "Group",
    "GroupRevocations",
    "GroupUpstreamTokens",
    "WorkerLink",
]

PROBE_TIMEOUT_S: Final = 0.5
"""A worker's answer to /healthz or /readyz (below the probes' own timeouts)."""
BOOT_GRACE_S: Final = 60.0
"""How long a new worker process that has not answered a probe yet counts as restarting (it is
importing, loading the configuration and binding); after that, as unresponsive."""
SCRAPE_TIMEOUT_S: Final = 2.0
"""A worker's /metrics; one that does not answer in time contributes its previous scrape."""
REVOKE_TIMEOUT_S: Final = 3.0
ADMIN_TIMEOUT_S: Final = 4.0
"""A worker's answer to the admin API of the upstream tokens (a list reads every record; below
``mcp-gateway upstream-tokens``'s own 10 s, so a Redis group can ask a second worker)."""
_MAX_ANSWER: Final = 16 * 1024 * 1024

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
                    "POST",
                    REVOKE_PATH,
                    timeout_s=REVOKE_TIMEOUT_S,
                    doc={"revocation_key": digest.hex(), "until": until},
                )
                answer = loads(body)
            except (OutboundError, ValueError):
                continue
            if status == 200 and isinstance(answer, dict):
                return answer.get("shared") is True
        return False


class GroupUpstreamTokens:
    """``POST /admin/upstream-tokens/list`` and ``.../purge`` for the group (the
    ``UpstreamTokenAdmin`` seam), asked of the workers on their private sockets.

    With ``state.backend: redis`` the records are the replicas' shared ones: the first running
    worker that answers lists them, or purges them (Redis carries the change to every worker and
    replica; that worker audits it). With ``state.backend: memory`` each worker holds the
    records of the consents it took: every running worker is asked, the records are put
    together and the purged counted (each worker audits its own). A worker (with Redis: every
    worker) that does not answer makes it :class:`StoreUnavailable` (the API answers 503; both
    are idempotent)."""

    def __init__(self, group: Group) -> None:
        self._group = group
        self._shared = group.config.state.backend == "redis"

    async def records(
        self, backend: str | None, issuer: str | None, subject: str | None
    ) -> list[dict[str, Any]]:
        answers = await self._ask(WORKER_LIST_PATH, selection_doc((backend, issuer, subject)))
        return [record for doc in answers for record in doc.get("records", [])]

    async def purge(self, backend: str | None, issuer: str | None, subject: str | None) -> int:
        answers = await self._ask(WORKER_PURGE_PATH, selection_doc((backend, issuer, subject)))
        return sum(int(doc.get("purged", 0)) for doc in answers)

    async def _ask(self, path: str, doc: Mapping[str, Any]) -> list[dict[str, Any]]:
        running = [link for link, _ in self._group.running()]
        if self._shared:
            for link in running:
                answer = await self._one(link, path, doc)
                if answer is not None:
                    return [answer]
            raise StoreUnavailable("no worker answered")
        answers = await asyncio.gather(*(self._one(link, path, doc) for link in running))
        if any(answer is None for answer in answers):
            raise StoreUnavailable("a worker did not answer")
        return [answer for answer in answers if answer is not None]

    @staticmethod
    async def _one(link: WorkerLink, path: str, doc: Mapping[str, Any]) -> dict[str, Any] | None:
        try:
            status, body = await link.request("POST", path, timeout_s=ADMIN_TIMEOUT_S, doc=doc)
            answer = loads(body)
        except (OutboundError, ValueError):
            status, answer = 0, None
        if status != 200 or not isinstance(answer, dict):
            log.error("worker.upstream_tokens_not_answered", worker=link.slot.index)
            return None
        return answer
