"""What of a subscription a caller may have, decided from one policy snapshot.

Shared by both subscription paths, so the two eras grant exactly the same things:
``subscriptions/listen`` (2026-07-28, :mod:`gateway.http.subscriptions.listen_route`), legacy
``resources/subscribe`` (:mod:`gateway.http.subscriptions.legacy_stream`) and the advertised
capabilities (``server/discover``, :mod:`gateway.http.methods.listing`); and both streams pass a
backend's notification on by the same rule (:func:`relayed_method`).

- ``toolsListChanged`` / ``promptsListChanged`` / ``resourcesListChanged``: per backend, only
  when that backend advertised ``listChanged`` for the kind *and* the caller sees at least one
  item of that kind from it (a caller who sees no prompt is never told the prompts changed);
- ``resourceSubscriptions``: each URI the caller may *read* (``resources:`` rule allowed, not
  merely listed with step-up), routed by the URI alone to a backend that advertised
  ``resources.subscribe``. Others are silently left out: the spec's acknowledgment "reflects the
  subset the server agreed to honor" (basic/patterns/subscriptions.mdx §Acknowledgment), so a
  hidden URI and one that does not exist look the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from gateway.errors import InvalidParams, TooManySubscriptions
from gateway.http.condition_gate import readable
from gateway.http.turn import Turn
from gateway.protocol.messages import LIST_CHANGED
from gateway.seams import (
    Backend,
    ListenEvent,
    ListenFilter,
    Listening,
    ListenOffer,
    Policy,
    PolicySource,
    Principal,
    listed,
)

__all__ = [
    "FILTER_KEYS",
    "MAX_URI_CHARS",
    "intersect",
    "listen_capabilities",
    "normal_filter",
    "parse_filter",
    "plan",
    "relayed_method",
]

MAX_URI_CHARS: Final = 8192
FILTER_KEYS: Final = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}


def plan(
    policy: Policy,
    who: Principal,
    wanted: ListenFilter,
    offers: Sequence[ListenOffer],
    backend: Backend,
    *,
    client_ip: str = "",
) -> dict[str, ListenFilter]:
    """Per backend, the part of ``wanted`` this caller may have (module docstring); a URI only
    when its resource rule's scopes and ``when:`` conditions let the caller read it. The URIs
    are in normal form (:func:`normal_filter`): each is decided on and handed on as it is."""
    listing = policy.listing
    kinds: dict[str, set[str]] = {}
    need = {k for k in ("tools", "prompts", "resources") if getattr(wanted, k)}
    if need:
        seen = _visible_kinds(policy, who, backend, listing, need)
        for offer in offers:
            kinds[offer.backend] = {
                k for k in need & offer.list_changed if offer.backend in seen[k]
            }
    subscribing = {offer.backend for offer in offers if offer.subscribe}
    uris: dict[str, list[str]] = {}
    for uri in wanted.uris:
        route = backend.route_uri(uri)
        if route is None or route[0] not in subscribing:
            continue
        if readable(policy, who, uri, backend=route[0], client_ip=client_ip):
            uris.setdefault(route[0], []).append(uri)
    out: dict[str, ListenFilter] = {}
    for offer in offers:
        got = ListenFilter(
            tools="tools" in kinds.get(offer.backend, ()),
            prompts="prompts" in kinds.get(offer.backend, ()),
            resources="resources" in kinds.get(offer.backend, ()),
            uris=tuple(uris.get(offer.backend, ())),
        )
        if not got.empty:
            out[offer.backend] = got
    return out


def _visible_kinds(
    policy: Policy, who: Principal, backend: Backend, listing: Any, need: set[str]
) -> dict[str, set[str]]:
    """kind -> the backends of which the caller sees at least one item of that kind."""
    seen: dict[str, set[str]] = {"tools": set(), "prompts": set(), "resources": set()}
    if "tools" in need:
        for tool in backend.catalog():
            if tool.backend not in seen["tools"] and listed(
                policy.decide_tool(who, tool.name), listing
            ):
                seen["tools"].add(tool.backend)
    surface = backend.surface()
    if "prompts" in need:
        for prompt in surface.prompts:
            if prompt.backend not in seen["prompts"] and listed(
                policy.decide_prompt(who, prompt.name), listing
            ):
                seen["prompts"].add(prompt.backend)
    if "resources" in need:
        for resource in surface.resources:
            if resource.backend not in seen["resources"] and listed(
                policy.decide_resource(who, resource.uri), listing
            ):
                seen["resources"].add(resource.backend)
        for template in surface.templates:
            if template.backend not in seen["resources"] and listed(
                policy.decide_template(who, template.uri), listing
            ):
                seen["resources"].add(template.backend)
    return seen


def listen_capabilities(
    policy: Policy,
    who: Principal,
    listening: Listening | None,
    backend: Backend,
    client_ip: str = "",
) -> dict[str, dict[str, bool]]:
    """2026-07-28 ``server/discover``: ``listChanged`` per kind and ``resources.subscribe``,
    true exactly when :func:`plan` would grant something of it to this caller."""
    if listening is None or not policy.decide_method(who, "subscriptions/listen").allowed:
        return {}
    offers = listening.listen_offers()
    if not any(o.list_changed or o.subscribe for o in offers):
        return {}
    everything = ListenFilter(tools=True, prompts=True, resources=True)
    granted = plan(policy, who, everything, offers, backend, client_ip=client_ip)
    out: dict[str, dict[str, bool]] = {
        kind: {"listChanged": any(getattr(g, kind) for g in granted.values())}
        for kind in ("tools", "prompts", "resources")
    }
    surface = backend.surface()
    subscribing = {o.backend for o in offers if o.subscribe}
    out["resources"]["subscribe"] = any(
        r.backend in subscribing
        and readable(policy, who, r.uri, backend=r.backend, client_ip=client_ip)
        for r in surface.resources
    ) or any(
        t.backend in subscribing and policy.decide_template(who, t.uri).allowed
        for t in surface.templates
    )
    return out


def parse_filter(params: Mapping[str, Any], max_uris: int) -> ListenFilter:
    """``params.notifications`` (SubscriptionFilter, schema.json) or ``invalid_params``."""
    raw = params.get("notifications")
    if not isinstance(raw, dict):
        raise InvalidParams(detail="notifications")
    flags: dict[str, bool] = {}
    for key, kind in FILTER_KEYS.items():
        value = raw.get(key, False)
        if type(value) is not bool:
            raise InvalidParams(detail=key)
        flags[kind] = value
    uris = raw.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(
        isinstance(u, str) and 0 < len(u) <= MAX_URI_CHARS for u in uris
    ):
        raise InvalidParams(detail="resourceSubscriptions")
    if len(uris) > max_uris:
        raise TooManySubscriptions()
    return ListenFilter(
        tools=flags["tools"],
        prompts=flags["prompts"],
        resources=flags["resources"],
        uris=tuple(dict.fromkeys(uris)),
    )


def normal_filter(policy: Policy, wanted: ListenFilter) -> ListenFilter:
    """``wanted`` with each URI in its normal form, the one a ``resources/read`` decides on and
    forwards (so :func:`plan` decides on, and the backend is asked for, the same bytes): one
    that is no URI is left out (no rule grants it), an ambiguous one refuses the whole listen
    (``ambiguous_resource_uri``)."""
    found = (policy.resource_uri(uri) for uri in wanted.uris)
    uris = tuple(dict.fromkeys(uri for uri in found if uri is not None))
    return replace(wanted, uris=uris)


def intersect(asked: ListenFilter, acked: ListenFilter) -> ListenFilter:
    """What a backend acknowledged of what the gateway asked it for."""
    got = set(acked.uris)
    ids = set(acked.task_ids)
    return ListenFilter(
        tools=asked.tools and acked.tools,
        prompts=asked.prompts and acked.prompts,
        resources=asked.resources and acked.resources,
        uris=tuple(u for u in asked.uris if u in got),
        task_ids=tuple(i for i in asked.task_ids if i in ids),
    )


def relayed_method(
    turn: Turn,
    backend: str,
    event: ListenEvent,
    honoured: ListenFilter | None,
    *,
    policy: Policy,
    source: PolicySource | None,
) -> str | None:
    """The notification method a backend's ``event`` goes out to the client as, or None when
    it is not passed on: only what ``backend``'s acknowledgment (``honoured``) covers, and
    ``notifications/resources/updated`` only for a URI the caller may read under the policy in
    force now (``source``'s, a reload the stream has not been told of yet included; else the
    stream's ``policy``). The stream renders it in its era's shape."""
    if honoured is None:
        return None
    if event.kind == "updated":
        uri = event.uri
        if not honoured.uris or uri is None:
            return None
        now = source.current() if source is not None else policy
        who, client_ip = turn.principal, turn.ctx.client_ip
        if not readable(now, who, uri, backend=backend, client_ip=client_ip):
            return None
        return "notifications/resources/updated"
    if event.kind not in LIST_CHANGED or not getattr(honoured, event.kind):
        return None  # an end, or a task's status (its own path: .task_listen)
    return LIST_CHANGED[event.kind]
