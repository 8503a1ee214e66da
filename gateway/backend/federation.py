"""Several upstream MCP servers behind one endpoint (implements ``gateway.seams.Backend``).

Every configured backend is one :class:`~gateway.backend.proxy.UpstreamBackend` with everything
of its own: era detection, legacy session, catalog refresh, connection pool, deadlines and
service credential. :class:`FederatedBackend` puts them behind the one seam the front door uses:

* **One merged catalog** (:func:`merge_catalogs`): every backend's tools under their exposed
  (prefixed) names, as one list sorted by name, so the front door's cursors page across
  backends like across any catalog. An exposed name is *ambiguous* when more than one backend
  could own it: two backends offer it, or a backend with a shorter prefix (only the empty one
  passes the load-time checks) offers a name inside another backend's prefix (``tickets__x``
  from the unprefixed backend would shadow the ``tickets`` backend's namespace, and a policy
  rule ``tickets__*`` written for that backend would cover it). Every tool with an ambiguous
  name is hidden, from every backend involved: never silently routed to the wrong backend.
  Each new ambiguity is logged once (``backend_tool_collision``); ``catalog_collisions{backend}``
  counts the hidden tools.
* **Routing by owner**: a ``tools/call`` goes to the backend whose catalog produced the
  :class:`~gateway.seams.ToolDef` (``ToolDef.backend``), with that backend's credential only.
* **Freshness**: the merged ``ttl_ms`` is the shortest refresh interval of the parts (each one
  ``catalog_refresh_s`` shortened by its upstream's ``ttlMs``, no lower than the refresh floor);
  the front door bounds it by ``protocol.tools_list_ttl_ms``.
* **Readiness**: per backend (:meth:`FederatedBackend.readiness`); the gateway's own follows
  ``backend_readiness`` (``all``: every backend fetched its catalog once; ``any``: one did).

* **Prompts, resources, templates** (:func:`merge_surface`): prompts merge like tools (exposed,
  prefixed names; an ambiguous name is hidden from every backend involved). With one backend,
  resource URIs and templates are the upstream's own. With several, every URI and template is
  rewritten into a gateway-owned form naming its backend, ``mcp-gw://<backend>/<the upstream's
  URI>`` (:data:`GATEWAY_SCHEME`), so a ``resources/read`` is routed by the URI alone, on any
  replica, without state, and the backend sees its own URI again; an upstream that lists or
  returns a URI already in that form is refused (it would be another backend's). The
  ``resource_link`` and embedded ``resource`` content of tool results, prompt messages and read
  results is rewritten the same way, so a link a tool returns can be read through the gateway.

A single ``backend:`` section is a federation of one backend (named ``default``, its
``name_prefix`` as prefix), so both configurations run the same code.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from gateway.backend.proxy import UpstreamBackend
from gateway.backend.results import FAILED_TEXT, error_result
from gateway.backend.surface_catalog import SurfacePart
from gateway.backend.surface_results import complete_result, prompt_result, read_result
from gateway.config import BackendReadiness
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.seams import (
    EMPTY_SURFACE,
    Catalog,
    InputRequired,
    Principal,
    PromptDef,
    RequestContext,
    ResourceDef,
    Surface,
    SurfaceReply,
    SurfaceRequest,
    ToolCall,
    ToolDef,
)

__all__ = [
    "GATEWAY_SCHEME",
    "Collision",
    "FederatedBackend",
    "MergedCatalog",
    "Part",
    "gateway_uri",
    "merge_catalogs",
    "merge_surface",
    "rewrite_links",
    "upstream_uri",
]

GATEWAY_SCHEME: Final = "mcp-gw"
"""The scheme of the resource URIs the gateway owns when several backends offer resources."""

_log = get_logger("gateway.backend.federation")

CollisionReason = Literal["same_name", "prefix"]


@dataclass(frozen=True, slots=True)
class Part:
    """One backend's contribution to the merged catalog."""

    backend: str
    prefix: str
    catalog: Catalog
    interval_s: float
    """Its refresh interval: how long its catalog is expected to stay as it is."""


@dataclass(frozen=True, slots=True)
class Collision:
    """One ambiguous exposed name and the backends that could own it (all of them hide it)."""

    tool: str
    backends: tuple[str, ...]
    reason: CollisionReason
    """``same_name``: several backends offer it; ``prefix``: it lies in another backend's
    prefix (offered by a backend whose prefix is a prefix of that one)."""


class MergedCatalog:
    """The federation's catalog snapshot: implements :class:`gateway.seams.Catalog`."""

    __slots__ = ("_order", "_tools", "collisions", "ttl_ms", "version")

    def __init__(
        self,
        tools: Sequence[ToolDef],
        *,
        version: str,
        ttl_ms: int | None,
        collisions: tuple[Collision, ...] = (),
    ) -> None:
        self._order: tuple[ToolDef, ...] = tuple(sorted(tools, key=lambda t: t.name))
        self._tools: dict[str, ToolDef] = {t.name: t for t in self._order}
        self.version = version
        self.ttl_ms = ttl_ms
        self.collisions = collisions

    def get(self, name: str) -> ToolDef | None:
        return self._tools.get(name)

    def owner(self, name: str) -> str | None:
        """The name of the backend that serves ``name``, or None (unknown or hidden)."""
        tool = self._tools.get(name)
        return tool.backend if tool is not None else None

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._tools)

    def __iter__(self) -> Iterator[ToolDef]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __repr__(self) -> str:
        return f"MergedCatalog(version={self.version!r}, tools={len(self._order)})"


def merge_catalogs(parts: Sequence[Part]) -> MergedCatalog:
    """Merge the parts' catalogs: see the module docstring for the ambiguity rule."""
    producers: dict[str, list[str]] = {}
    for part in parts:
        for tool in part.catalog:
            producers.setdefault(tool.name, []).append(part.backend)
    found: dict[str, Collision] = {
        name: Collision(name, tuple(owners), "same_name")
        for name, owners in producers.items()
        if len(owners) > 1
    }
    for part in parts:
        # Longer prefixes that start with this one: their namespaces are not this backend's.
        inner = [
            other
            for other in parts
            if other.prefix != part.prefix and other.prefix.startswith(part.prefix)
        ]
        if not inner:
            continue
        for tool in part.catalog:
            for other in inner:
                if tool.name.startswith(other.prefix) and tool.name not in found:
                    owners = (part.backend, other.backend)
                    found[tool.name] = Collision(tool.name, owners, "prefix")
    tools = [tool for part in parts for tool in part.catalog if tool.name not in found]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(f"{part.backend}\0{part.catalog.version}\n".encode())
    for name in sorted(found):
        digest.update(f"hidden\0{name}\n".encode())
    intervals = [part.interval_s for part in parts]
    ttl_ms = int(min(intervals) * 1000) if intervals else None
    collisions = tuple(found[name] for name in sorted(found))
    return MergedCatalog(
        tools, version=digest.hexdigest()[:16], ttl_ms=ttl_ms, collisions=collisions
    )


def gateway_uri(backend: str, uri: str) -> str | None:
    """The exposed form of a backend's URI (or template); None when the upstream sent one
    that is already in the gateway's form (refused: it would be another backend's)."""
    if uri[: len(GATEWAY_SCHEME) + 1].lower() == GATEWAY_SCHEME + ":":
        return None
    return f"{GATEWAY_SCHEME}://{backend}/{uri}"


def upstream_uri(uri: str) -> tuple[str, str] | None:
    """(backend, the backend's own URI) for an exposed URI, or None when it is not ours.

    The scheme and the host compare case-insensitively (RFC 3986 §6.2.2.1), the rest exactly.
    """
    head = GATEWAY_SCHEME + "://"
    if uri[: len(head)].lower() != head:
        return None
    backend, slash, original = uri[len(head) :].partition("/")
    if not slash or not original:
        return None
    return backend.lower(), original


_LINKED: Final = frozenset({"resource_link", "resource"})


def rewrite_links(result: dict[str, Any], backend: str) -> dict[str, Any] | None:
    """A tool result with the URIs of its ``resource_link`` and embedded ``resource`` content
    in the gateway's form (so the client can read them through the gateway); None when the
    upstream already used that form (garbled: another backend's URI). Untouched otherwise."""
    content = result.get("content")
    if not isinstance(content, list) or not any(
        isinstance(block, dict) and block.get("type") in _LINKED for block in content
    ):
        return result
    blocks = []
    for original in content:
        block = original
        if isinstance(block, dict) and block.get("type") == "resource_link":
            uri = block.get("uri")
            exposed = gateway_uri(backend, uri) if isinstance(uri, str) else None
            if exposed is None:
                return None
            block = {**block, "uri": exposed}
        elif isinstance(block, dict) and block.get("type") == "resource":
            inner = block.get("resource")
            uri = inner.get("uri") if isinstance(inner, dict) else None
            exposed = gateway_uri(backend, uri) if isinstance(uri, str) else None
            if exposed is None or not isinstance(inner, dict):
                return None
            block = {**block, "resource": {**inner, "uri": exposed}}
        blocks.append(block)
    return {**result, "content": blocks}


def merge_surface(
    parts: Sequence[tuple[str, SurfacePart, frozenset[str], bool]], *, rewrite: bool
) -> Surface:
    """Merge (backend, part, offers, subscribe) of every backend (module docstring)."""
    owners: dict[str, list[PromptDef]] = {}
    resources: list[ResourceDef] = []
    templates: list[ResourceDef] = []
    offers: set[str] = set()
    subscribe = False
    digest = hashlib.sha256()
    for backend, part, offered, subscribes in parts:
        offers |= offered
        subscribe = subscribe or subscribes
        for prompt in part.prompts:
            owners.setdefault(prompt.name, []).append(prompt)
        for kind, items in (("r", part.resources), ("t", part.templates)):
            for item in items:
                exposed = gateway_uri(backend, item.uri) if rewrite else item.uri
                if exposed is None:
                    reason = "uri in the gateway's own form"
                    _log.warning("backend_item_dropped", backend=backend, kind="resource",
                                 item=item.uri[:128], reason=reason)  # fmt: skip
                    continue
                key = "uriTemplate" if kind == "t" else "uri"
                definition = {**item.definition, key: exposed}
                target = templates if kind == "t" else resources
                target.append(ResourceDef(exposed, definition, item.upstream_uri, backend))
                digest.update(f"{kind}\0{exposed}\n".encode())
    prompts = []
    for name in sorted(owners):
        found = owners[name]
        if len(found) > 1:  # offered by several backends: hidden from all (never misrouted)
            continue
        prompts.append(found[0])
        digest.update(f"p\0{name}\0{found[0].backend}\n".encode())
    return Surface(
        prompts=tuple(prompts),
        resources=tuple(sorted(_unique(resources), key=lambda r: r.uri)),
        templates=tuple(sorted(_unique(templates), key=lambda r: r.uri)),
        offers=frozenset(offers),
        subscribe=subscribe,
        version=digest.hexdigest()[:16],
    )


def _unique(items: list[ResourceDef]) -> list[ResourceDef]:
    """Drop every URI listed by more than one backend (one backend, unrewritten: none)."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.uri] = counts.get(item.uri, 0) + 1
    return [item for item in items if counts[item.uri] == 1]


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
    ) -> None:
        """``max_blob_bytes``: decoded ``blob`` bytes one ``resources/read`` may carry
        (``limits.max_response_bytes``)."""
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
        for member in self._list:
            member.on_update = self._remerge

    # --- the Backend seam -------------------------------------------------------------

    def catalog(self) -> MergedCatalog:
        """The merged snapshot; re-merged only when a part's catalog or interval changed."""
        key = tuple((m.catalog(), m.refresh_interval) for m in self._list)
        if key != self._key:
            self._merge(key)
        return self._merged

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
                merged.prompts, merged.resources, merged.templates, merged.offers,
                merged.subscribe, merged.version, ttl,
            )  # fmt: skip
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
            _log.warning("backend_request_failed", backend=backend, method=request.method,
                         kind="bad_result")  # fmt: skip
            return SurfaceReply(fault="garbled")
        return SurfaceReply(result=checked)

    def route_uri(self, uri: str) -> tuple[str, str] | None:
        """(backend, its own URI) for a URI a client sends, or None when no backend owns it."""
        if not self.rewrites_uris:
            return self._list[0].name, uri
        found = upstream_uri(uri)
        if found is None or found[0] not in self._members:
            return None
        return found

    async def call_tool(
        self, call: ToolCall, principal: Principal, ctx: RequestContext, deadline: float
    ) -> dict[str, Any] | InputRequired:
        """Call the tool on the backend that owns it (``ToolDef.backend``), only there."""
        member = self._members.get(call.tool.backend)
        if member is None:  # a ToolDef this federation did not hand out: refuse, never guess
            ctx.outcome = "upstream_error"
            ctx.backend_ms = 0.0
            return error_result(FAILED_TEXT)
        result = await member.call_tool(call, principal, ctx, deadline)
        if not self.rewrites_uris or not isinstance(result, dict):
            return result  # one backend: its URIs are the exposed ones, nothing to do
        rewritten = rewrite_links(result, member.name)
        if rewritten is None:
            _log.warning("backend_call_failed", backend=member.name, tool=call.tool.name,
                         kind="bad_result", reason="uri in the gateway's own form")  # fmt: skip
            ctx.outcome = "upstream_error"
            return error_result(FAILED_TEXT)
        return rewritten

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

    def readiness(self) -> dict[str, bool]:
        return {m.name: m.ready for m in self._list}

    def report(self) -> dict[str, Any]:
        """The ``backends`` member of ``/readyz``: one entry per backend."""
        hidden = self._hidden_counts(self.catalog())
        out: dict[str, Any] = {}
        for member in self._list:
            state = member.link.state
            out[member.name] = {
                "ready": member.ready,
                "era": state.era if state is not None else None,
                "tools": len(member.catalog()),
                "hidden": hidden.get(member.name, 0),
                "catalog_age_s": round(member.catalog_age(), 1),
            }
            lock = member.refresher.lock_report()
            if lock is not None:
                out[member.name]["catalog_lock"] = lock
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
        parts = [
            Part(m.name, m.settings.name_prefix, catalog, interval)
            for m, (catalog, interval) in zip(self._list, key, strict=True)
        ]
        merged = merge_catalogs(parts)
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
        if self._metrics is not None:
            hidden = self._hidden_counts(merged)
            for member in self._list:
                self._metrics.catalog_collisions.labels(backend=member.name).set(
                    hidden.get(member.name, 0)
                )
            self._metrics.set_catalog_names(merged.names)

    def _hidden_counts(self, merged: MergedCatalog) -> Mapping[str, int]:
        ambiguous = {c.tool for c in merged.collisions}
        counts: dict[str, int] = {}
        for member in self._list:
            counts[member.name] = sum(1 for tool in member.catalog() if tool.name in ambiguous)
        return counts
