"""Several upstream MCP servers behind one endpoint (implements ``gateway.seams.Backend``).

Every configured backend is one :class:`~gateway.backend.upstream_backend.UpstreamBackend` with
everything of its own: era detection, legacy session, catalog refresh, connection pool, deadlines
and service credential. :class:`FederatedBackend` puts them behind the one seam the front door uses:

* **One merged catalog** (:func:`~gateway.backend.catalog.tool_merge.merge_catalogs`): every
  backend's tools under their exposed names (prefixed, then the policy's ``override:`` applied:
  renamed, retitled, arguments fixed or hidden), as one list sorted by name, so the front door's
  cursors page across backends like across any catalog. An ambiguous exposed name is hidden from
  every backend involved (:mod:`gateway.backend.catalog.tool_merge`); each new ambiguity is logged
  once (``backend_tool_collision``), ``catalog_collisions{backend}`` counts the hidden tools. A tool
  its override does not fit is hidden and logged once (``tool_override_refused``). The merge is
  redone when a part's catalog changes or a new policy version is loaded (:meth:`use_policy`), so an
  override change takes effect without a restart, at the next request.
* **Routing by owner**: a ``tools/call`` goes to the backend whose catalog produced the
  :class:`~gateway.seams.ToolDef` (``ToolDef.backend``), with that backend's credential only.
* **Freshness**: the merged ``ttl_ms`` is the shortest refresh interval of the parts (each one
  ``catalog_refresh_s`` shortened by its upstream's ``ttlMs``, no lower than the refresh floor);
  the front door bounds it by ``protocol.tools_list_ttl_ms``.
* **Readiness**: per backend (:meth:`FederatedBackend.readiness`); the gateway's own follows
  ``backend_readiness`` (``all``: every backend fetched its catalog once; ``any``: one did).

* **Prompts, resources, templates** (:func:`~gateway.backend.catalog.surface_merge.merge_surface`):
  prompts merge like tools; with several backends every resource URI and template is exposed
  in the gateway's ``mcp-gw://<backend>/...`` form (:mod:`gateway.backend.catalog.surface_merge`).

A single ``backend:`` section is a federation of one backend (named ``default``, its
``name_prefix`` as prefix), so both configurations run the same code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from gateway.backend.catalog.pinning import OverrideSource
from gateway.backend.catalog.surface_merge import (
    GATEWAY_SCHEME,
    gateway_uri,
    merge_surface,
    rewrite_links,
    upstream_uri,
)
from gateway.backend.catalog.tool_catalog import DEFAULT_MAX_DESCRIPTION_CHARS
from gateway.backend.catalog.tool_merge import (
    Collision,
    MergedCatalog,
    Part,
    Refusal,
    merge_catalogs,
)
from gateway.backend.upstream.surface_results import complete_result, prompt_result, read_result
from gateway.backend.upstream.tool_results import FAILED_TEXT, failed_call
from gateway.backend.upstream_backend import UpstreamBackend
from gateway.config import BackendReadiness
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.protocol.results import tool_error_result
from gateway.seams import (
    EMPTY_SURFACE,
    InputRequired,
    Principal,
    RequestContext,
    Surface,
    SurfaceReply,
    SurfaceRequest,
    TaskCreated,
    TaskReply,
    TaskRequest,
    ToolCall,
)

__all__ = [
    "GATEWAY_SCHEME",
    "Collision",
    "FederatedBackend",
    "MergedCatalog",
    "OverrideSource",
    "Part",
    "gateway_uri",
    "merge_catalogs",
    "merge_surface",
    "rewrite_links",
    "upstream_uri",
]

_log = get_logger("gateway.backend.federation")


EMPTY_KEY: Final[tuple[Any, ...]] = ()


class FederatedBackend:
    """Every configured backend behind one :class:`gateway.seams.Backend` (module docstring)."""

    def __init__(
        self,
        members: Sequence[UpstreamBackend],
        *,
        readiness: BackendReadiness = "all",
        metrics: Metrics | None = None,
        max_blob_bytes: int = 1_048_576,
        policy: OverrideSource | None = None,
        max_description_chars: int = DEFAULT_MAX_DESCRIPTION_CHARS,
    ) -> None:
        """``max_blob_bytes``: decoded ``blob`` bytes one ``resources/read`` may carry
        (``limits.max_response_bytes``). ``policy``: the policy set whose overrides the merge
        applies (:meth:`use_policy` replaces it after a reload). ``max_description_chars``:
        the cap of override texts."""
        if not members:
            raise ValueError("a federation needs at least one backend")
        self._list = tuple(members)
        self._members: dict[str, UpstreamBackend] = {m.name: m for m in self._list}
        if len(self._members) != len(self._list):
            raise ValueError("backend names must be unique")
        self._readiness = readiness
        self._max_blob = max_blob_bytes
        self._metrics = metrics
        self._key: tuple[Any, ...] = EMPTY_KEY
        self._merged = MergedCatalog((), version="", ttl_ms=None)
        self._surface_key: tuple[Any, ...] = EMPTY_KEY
        self._surface: Surface = EMPTY_SURFACE
        self.rewrites_uris = len(self._list) > 1
        """Several backends: resource URIs are exposed in the gateway's form (gateway_uri)."""
        self._reported: frozenset[str] = frozenset()
        self._refused: frozenset[Refusal] = frozenset()
        self._source = policy
        self._max_chars = max_description_chars
        for member in self._list:
            member.on_update = self._remerge

    # --- the Backend seam -------------------------------------------------------------

    def catalog(self) -> MergedCatalog:
        """The merged snapshot; re-merged only when a part's catalog or interval, or the
        policy set, changed."""
        key = (self._source, *((m.catalog(), m.refresh_interval) for m in self._list))
        if key != self._key:
            self._merge(key)
        return self._merged

    def use_policy(self, policy: OverrideSource) -> None:
        """A new policy set was swapped in (any thread): the next :meth:`catalog` merges again
        under its overrides. One attribute assignment: a request costs nothing for it. Each
        member's catalog lock hears of it first (a changed override is held before the merge
        could expose it)."""
        for member in self._list:
            member.refresher.use_overrides(policy)
        self._source = policy

    def surface(self) -> Surface:
        """The merged prompts, resources and templates; re-merged when a part changed."""
        key = tuple((m.surface(), m.offers, m.subscribe, m.refresh_interval) for m in self._list)
        if key != self._surface_key:
            merged = merge_surface(
                [
                    (m.name, part, offers, sub)
                    for m, (part, offers, sub, _) in zip(self._list, key, strict=True)
                ],
                rewrite=self.rewrites_uris,
            )
            ttl = int(min(m.refresh_interval for m in self._list) * 1000)
            self._surface = Surface(
                merged.prompts,
                merged.resources,
                merged.templates,
                merged.offers,
                merged.subscribe,
                merged.version,
                ttl,
            )
            self._surface_key = key
        return self._surface

    async def surface_request(
        self, request: SurfaceRequest, principal: Principal, ctx: RequestContext, deadline: float
    ) -> SurfaceReply:
        """Send the request to ``request.backend`` only (the owner the front door resolved)."""
        member = self._members.get(request.backend)
        if member is None:
            return SurfaceReply(fault="garbled")
        reply = await member.surface_request(request, principal, ctx, deadline)
        if reply.result is None:
            return reply
        backend = member.name

        def rewrite(uri: str) -> str | None:
            return gateway_uri(backend, uri) if self.rewrites_uris else uri

        if request.method == "prompts/get":
            checked = prompt_result(reply.result, rewrite)
        elif request.method == "resources/read":
            checked = read_result(reply.result, max_blob_bytes=self._max_blob, rewrite=rewrite)
        else:
            checked = complete_result(reply.result)
        if checked is None:
            _log.warning(
                "backend_request_failed", backend=backend, method=request.method, kind="bad_result"
            )
            return SurfaceReply(fault="garbled")
        return SurfaceReply(result=checked)

    def route_uri(self, uri: str) -> tuple[str, str] | None:
        """(backend, its own URI) for a URI a client sends (in normal form, so the part after
        ``mcp-gw://<backend>/`` is the wrapped URI's own normal form), or None when no backend
        owns it."""
        if not self.rewrites_uris:
            return self._list[0].name, uri
        found = upstream_uri(uri)
        if found is None or found[0] not in self._members:
            return None
        return found

    async def call_tool(
        self, call: ToolCall, principal: Principal, ctx: RequestContext, deadline: float
    ) -> dict[str, Any] | InputRequired | TaskCreated:
        """Call the tool on the backend that owns it (``ToolDef.backend``), only there."""
        member = self._members.get(call.tool.backend)
        if member is None:  # a ToolDef this federation did not hand out: refuse, never guess
            ctx.outcome = "upstream_error"
            ctx.backend_ms = 0.0
            return tool_error_result(FAILED_TEXT)
        result = await member.call_tool(call, principal, ctx, deadline)
        if not self.rewrites_uris or not isinstance(result, dict):
            return result  # one backend: its URIs are the exposed ones, nothing to do
        rewritten = rewrite_links(result, member.name)
        if rewritten is None:
            refusal, ctx.outcome = failed_call(
                member.name, call.tool.name, "bad_result", reason="uri in the gateway's own form"
            )
            return refusal
        return rewritten

    # --- tasks (the TaskRelay seam) ------------------------------------------------------

    def task_backends(self) -> frozenset[str]:
        """The backends that advertise the tasks extension."""
        return frozenset(m.name for m in self._list if _offers_tasks(m))

    async def task_request(
        self, request: TaskRequest, principal: Principal, ctx: RequestContext, deadline: float
    ) -> TaskReply:
        """Send the request to the task's backend only; one no longer configured is asked
        nothing (the task is unknown)."""
        member = self._members.get(request.backend)
        if member is None:
            return TaskReply(unknown=True, configured=False)
        credential = await member.caller_credential(request.caller_token, principal, ctx, deadline)
        reply = await member.task_call.request(
            request, principal, ctx, deadline, credential=credential
        )
        task = reply.task
        if task is None or task.result is None or not self.rewrites_uris:
            return reply
        rewritten = rewrite_links(dict(task.result), member.name)  # a task's result is a tool's
        if rewritten is None:
            _log.warning(
                "backend_request_failed",
                backend=member.name,
                method=request.method,
                kind="bad_result",
                reason="uri in the gateway's own form",
            )
            return TaskReply(fault="garbled")
        return TaskReply(task=replace(task, result=rewritten))

    def forget_caller(self, digest: bytes) -> None:
        """A caller token was revoked: every backend drops what it made for it (reusable
        assertions, exchanged tokens)."""
        for member in self._list:
            member.forget_caller(digest)

    # --- members, readiness -----------------------------------------------------------

    @property
    def members(self) -> tuple[UpstreamBackend, ...]:
        return self._list

    def member(self, name: str) -> UpstreamBackend | None:
        """The backend configured under ``name``."""
        return self._members.get(name)

    def owner(self, tool: str) -> UpstreamBackend | None:
        """The backend that serves the exposed tool name ``tool`` (None: unknown or hidden)."""
        name = self.catalog().owner(tool)
        return self._members.get(name) if name is not None else None

    @property
    def ready(self) -> bool:
        """The gateway's backend readiness per ``backend_readiness``."""
        states = (m.ready for m in self._list)
        return all(states) if self._readiness == "all" else any(states)

    @property
    def all_ready(self) -> bool:
        return all(m.ready for m in self._list)

    def held_tools(self) -> frozenset[str]:
        """Every backend's tools the catalog lock holds back now (``on_change: hold``)."""
        return frozenset().union(*(m.refresher.held_tools() for m in self._list))

    def readiness(self) -> dict[str, bool]:
        return {m.name: m.ready for m in self._list}

    def report(self) -> dict[str, Any]:
        """The ``backends`` member of ``/readyz``: one entry per backend."""
        merged = self.catalog()
        refused: dict[str, int] = {}
        for refusal in merged.refusals:
            refused[refusal.backend] = refused.get(refusal.backend, 0) + 1
        out: dict[str, Any] = {}
        for member in self._list:
            state = member.link.state
            out[member.name] = {
                "ready": member.ready,
                "era": state.era if state is not None else None,
                "tools": len(member.catalog()),
                "hidden": merged.collided.get(member.name, 0),
                "catalog_age_s": round(member.catalog_age(), 1),
            }
            lock = member.refresher.lock_report()
            if lock is not None:
                out[member.name]["catalog_lock"] = lock
            if member.name in refused:  # only then: tools hidden by an override that misfits
                out[member.name]["override_refused"] = refused[member.name]
        return out

    # --- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Start every backend at once: a slow or absent one delays no other."""
        await asyncio.gather(*(member.start() for member in self._list))
        self.catalog()

    async def close(self) -> None:
        await asyncio.gather(*(member.close() for member in self._list))

    # --- merging ----------------------------------------------------------------------

    def _remerge(self) -> None:
        self.catalog()

    def _merge(self, key: tuple[Any, ...]) -> None:
        source: OverrideSource | None = key[0]
        parts = [
            Part(m.name, m.settings.name_prefix, catalog, interval)
            for m, (catalog, interval) in zip(self._list, key[1:], strict=True)
        ]
        merged = merge_catalogs(
            parts,
            source.override_for if source is not None else None,
            max_description_chars=self._max_chars,
        )
        self._key, self._merged = key, merged
        ambiguous = frozenset(c.tool for c in merged.collisions)
        for collision in merged.collisions:
            if collision.tool not in self._reported:
                _log.warning(
                    "backend_tool_collision",
                    tool=collision.tool,
                    backends=list(collision.backends),
                    reason=collision.reason,
                )
        self._reported = ambiguous
        refused = frozenset(merged.refusals)
        for refusal in merged.refusals:
            if refusal not in self._refused:
                _log.warning(
                    "tool_override_refused",
                    tool=refusal.tool,
                    backend=refusal.backend,
                    reason=refusal.reason,
                    override=refusal.where,
                )
        self._refused = refused
        if self._metrics is not None:
            for member in self._list:
                self._metrics.catalog.collisions.labels(backend=member.name).set(
                    merged.collided.get(member.name, 0)
                )
            self._metrics.set_catalog_names(merged.names)


def _offers_tasks(member: UpstreamBackend) -> bool:
    """The upstream advertised the tasks extension (2026-07-28, as last detected)."""
    state = member.link.known_state
    return state is not None and state.era == "modern" and state.tasks
