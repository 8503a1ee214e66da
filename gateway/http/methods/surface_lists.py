"""The surface's lists and capabilities: ``prompts/list``, ``resources/list``,
``resources/templates/list`` and what ``initialize`` / ``server/discover`` advertise.

Split from :mod:`gateway.http.methods.surface_routes` (which answers ``prompts/get``,
``resources/read`` and ``completion/complete``): the lists show only what the caller may use (or,
with ``listing: step_up``, could use with more scopes), paged by the ``tools/list`` cursors;
2026-07-28 results carry ``ttlMs`` and ``cacheScope: "private"`` (caching.mdx: the lists are
filtered per caller). A prompt or resource whose rule has a ``when:`` condition that is false for
this caller (and does not read ``arguments``) is not listed (:mod:`gateway.http.condition_gate`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final, NamedTuple

from gateway.errors import GatewayError, LegacyResourceNotFound, MethodNotFound, ResourceNotFound
from gateway.http.methods.route_parts import RouteParts
from gateway.http.progress import ProgressRelay
from gateway.http.turn import Route, Turn, bounded_success, check_expiry, require_method_scopes
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import ListPage, surface_list_result
from gateway.seams import AccessQuestion, Decision, Era, Surface, listed

__all__ = ["SurfaceLists", "not_found", "surface_capabilities"]


def not_found(era: Era | None) -> GatewayError:
    """The era's answer for a resource that does not exist (or is hidden)."""
    return LegacyResourceNotFound() if era == "legacy" else ResourceNotFound()


def surface_capabilities(turn: Turn, surface: Surface) -> dict[str, Any]:
    """The ``prompts``, ``resources``, ``completions`` capabilities for this caller: only those
    a backend offers *and* for which the policy shows the caller at least one item."""
    listing = turn.policy.listing

    def shows(method: str) -> bool:
        return any(listed(entry.decision, listing) for entry in _entries(method, turn, surface))

    out: dict[str, Any] = {}
    if "prompts" in surface.offers and shows("prompts/list"):
        out["prompts"] = {"listChanged": False}
    if "resources" in surface.offers and (
        shows("resources/list") or shows("resources/templates/list")
    ):
        out["resources"] = {"listChanged": False, "subscribe": False}
    if "completions" in surface.offers and ("prompts" in out or "resources" in out):
        out["completions"] = {}
    return out


class SurfaceLists:
    """The routes of the three list methods."""

    def __init__(self, parts: RouteParts) -> None:
        config = parts.config
        self._conditions = parts.conditions
        self._config = config
        self._backend = parts.backend
        self._server = config.server
        self._cap = config.limits.max_response_bytes

    def routes(self) -> dict[str, Route]:
        return {m: Route(self._list, admit=_admit_method) for m in _LIST_OFFER}

    async def _list(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        surface = self._backend.surface()
        if _LIST_OFFER[message.method] not in surface.offers:
            raise MethodNotFound()
        require_method_scopes(turn, message.method)
        listing = turn.policy.listing
        # A rule's `when:` conditions that read no arguments hide prompts and resources
        # (templates have none).
        conditioned = message.method in _CONDITIONED
        items = [
            (entry.key, entry.definition)
            for entry in _entries(message.method, turn, surface)
            if listed(entry.decision, listing)
            and (not conditioned or self._conditions.listed(turn, entry.question))
        ]
        check_expiry(turn, admitted)
        page = ListPage.asked(
            message, self._config.protocol.page_size, self._ttl_ms(surface), self._server
        )
        result = surface_list_result(message.method, items, page)
        return bounded_success(message, result, self._cap)

    def _ttl_ms(self, surface: Surface) -> int:
        ttl_ms = self._config.protocol.tools_list_ttl_ms
        return ttl_ms if surface.ttl_ms is None else min(ttl_ms, surface.ttl_ms)


_LIST_OFFER: Final = {
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
}


_CONDITIONED: Final = frozenset({"prompts/list", "resources/list"})
"""The listings whose items pass their rule's conditions (templates have none)."""


class _Entry(NamedTuple):
    key: str
    """A prompt's name, a resource's URI, a template's URI template."""
    definition: Mapping[str, Any]
    decision: Decision
    question: AccessQuestion
    """What the item's rule's conditions are asked (its definition's, built with it)."""


def _entries(method: str, turn: Turn, surface: Surface) -> Iterator[_Entry]:
    """A list method's items, each with the policy's decision for this caller."""
    policy, who = turn.policy, turn.principal
    if method == "prompts/list":
        for p in surface.prompts:
            yield _Entry(p.name, p.definition, policy.decide_prompt(who, p.name), p.question)
    elif method == "resources/list":
        for r in surface.resources:
            yield _Entry(r.uri, r.definition, policy.decide_resource(who, r.uri), r.question)
    else:
        for t in surface.templates:
            yield _Entry(t.uri, t.definition, policy.decide_template(who, t.uri), t.question)


def _admit_method(message: McpMessage, turn: Turn) -> None:
    require_method_scopes(turn, message.method)
