"""The group's ops listener (``ops_listen``) of ``serve --workers N``, served by the supervisor.

Same paths as a single gateway's ops listener, answered for the whole process group by asking
every worker on its private socket (:class:`~gateway.workers.group.WorkerLink`):

* ``/healthz``: 200 while every running worker answers its own ``/healthz`` within
  :data:`~gateway.workers.group.PROBE_TIMEOUT_S`; a restarting worker does not count against it,
  neither while it waits for its restart nor while its new process boots (it has not answered yet,
  for up to :data:`~gateway.workers.group.BOOT_GRACE_S`); 503 names the worker that did not answer;
* ``/readyz``: 200 only when every worker slot has a running worker whose ``/readyz`` is
  ready; 503 ``draining`` from the first SIGTERM; the body lists each worker;
* ``/metrics``: the workers' registries merged (:mod:`gateway.observability.group_metrics`);
* ``POST /admin/revoke`` (with ``admin.token``): the same API, carried out on every worker
  (:class:`~gateway.workers.group.GroupRevocations`);
* ``POST /admin/upstream-tokens/list`` and ``.../purge`` (with ``admin.token`` and a
  ``user_oauth`` backend): the same API, asked of the workers
  (:class:`~gateway.workers.group.GroupUpstreamTokens`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

from aiohttp import web

from gateway.app.admin import add_admin_routes
from gateway.app.admin_upstream import add_upstream_admin_routes
from gateway.app.request_id import echo_request_id, request_id_middleware
from gateway.backend.credentials.assertion_keys import GatewayKeys
from gateway.config.user_oauth import user_oauth_backends
from gateway.http.pipeline.routes import add_jwks_route, ops_jwks
from gateway.observability.audit import AuditSink
from gateway.workers.group import Group, GroupRevocations, GroupUpstreamTokens, WorkerLink

__all__ = [
    "build_group_ops_app",
]

_NO_STORE: Final = {"Cache-Control": "no-store"}


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
            *(
                link.probe("/readyz") if pid is not None else _none()
                for link, pid in zip(group.links, pids, strict=True)
            )
        )
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
    if user_oauth_backends(config.backends):
        add_upstream_admin_routes(app, config, GroupUpstreamTokens(group))
    keys = GatewayKeys.from_config(config)  # the same files the workers sign with
    # The checkpoint key too (the workers sign their chains with it): audit verify --jwks.
    checkpoint = audit.checkpoint_jwk if audit is not None else None
    jwks = ops_jwks(keys.jwks if keys.enabled else None, checkpoint)
    if jwks is not None:
        add_jwks_route(app, jwks)
    return app


_WORST: Final[dict[str, Any]] = {
    "tools": min,
    "hidden": max,
    "override_refused": max,
    "catalog_age_s": max,
}


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
