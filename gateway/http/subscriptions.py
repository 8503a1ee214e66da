"""``subscriptions/listen`` (MCP 2026-07-28 basic/patterns/subscriptions.mdx) under the policy.

The client's request opens one SSE stream. The gateway decides, from the request's policy
snapshot, what of the filter this caller may have (:func:`plan`):

- ``toolsListChanged`` / ``promptsListChanged`` / ``resourcesListChanged``: per backend, only
  when that backend advertised ``listChanged`` for the kind *and* the caller sees at least one
  item of that kind from it (a caller who sees no prompt is never told the prompts changed);
- ``resourceSubscriptions``: each URI the caller may *read* (``resources:`` rule allowed, not
  merely listed with step-up), routed by the URI alone to a backend that advertised
  ``resources.subscribe``. Others are silently left out of the acknowledgment: the spec's
  acknowledgment "reflects the subset the server agreed to honor" (§Acknowledgment), so a
  hidden URI and one that does not exist look the same.

It then opens one listen per backend concerned, with the gateway's own credential
(:class:`gateway.seams.Listening`), waits for each acknowledgment until the request deadline,
and acknowledges the intersection to the client, tagged with the client's request id
(``io.modelcontextprotocol/subscriptionId``). Each backend notification is passed on only when
the acknowledgment covers it, and ``notifications/resources/updated`` only when the caller may
read that URI under the stream's current policy (the spec allows a sub-resource URI).

The stream ends:

- when the client goes away (every backend stream is closed with it);
- with the graceful ``subscriptions/listen`` result (§Graceful Closure) at
  ``limits.subscription_lifetime_s`` or the token's expiry, at a graceful stop (drain), and
  after a policy reload that takes away anything the acknowledgment granted (the client
  listens again and gets what the new policy allows);
- when a backend ends its stream: gracefully if the backend did, abruptly otherwise (the client
  MAY reconnect, §Graceful Closure).

Bounds, per replica (:class:`SubscriptionHub`): ``limits.max_subscriptions_per_principal``
streams and ``limits.max_subscribed_uris_per_principal`` URIs per subject (429
``too_many_subscriptions``), ``limits.max_subscriptions`` streams (503 ``over_capacity``). An
acknowledged stream stops holding an in-flight slot (it is not work in progress). The legacy era
has no ``subscriptions/listen``; see docs/protocol.md#subscriptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web

from gateway.config import Limits
from gateway.errors import (
    InvalidParams,
    MethodNotFound,
    OverCapacity,
    TooManySubscriptions,
)
from gateway.http.progress import SSE_HEADERS, ProgressRelay
from gateway.http.turn import Route, Turn, check_expiry, require_method_scopes
from gateway.observability.logging import get_logger
from gateway.protocol.messages import McpMessage
from gateway.seams import (
    Backend,
    ListenEvent,
    ListenFilter,
    Listening,
    ListenOffer,
    ListenRefused,
    Policy,
    PolicySource,
    Principal,
    RequestContext,
    UpstreamListen,
    listed,
)

__all__ = [
    "KEEPALIVE_S",
    "RELOAD_POLL_S",
    "SUBSCRIPTION_ID",
    "SubscriptionHub",
    "SubscriptionRoutes",
    "listen_capabilities",
    "parse_filter",
    "plan",
]

SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
KEEPALIVE_S: Final = 25.0
"""An SSE comment is written this often on a quiet stream (idle proxies; a gone client shows)."""
RELOAD_POLL_S: Final = 0.5
"""How often the hub looks for a new policy snapshot while streams are open."""
MAX_URI_CHARS: Final = 8192
MAX_QUEUED: Final = 256
"""Notifications waiting for one client; a client that stops reading is ended at the cap."""
_ACK: Final = "notifications/subscriptions/acknowledged"
_LIST_CHANGED: Final = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}
_FILTER_KEYS: Final = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}

_log = get_logger("gateway.http.subscriptions")


# --- what a caller may have -------------------------------------------------------------------


def plan(
    policy: Policy,
    who: Principal,
    wanted: ListenFilter,
    offers: Sequence[ListenOffer],
    backend: Backend,
) -> dict[str, ListenFilter]:
    """Per backend, the part of ``wanted`` this caller may have (module docstring)."""
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
        if not policy.decide_resource(who, uri).allowed:
            continue
        route = backend.route_uri(uri)
        if route is not None and route[0] in subscribing:
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
    policy: Policy, who: Principal, listening: Listening | None, backend: Backend
) -> dict[str, dict[str, bool]]:
    """2026-07-28 ``server/discover``: ``listChanged`` per kind and ``resources.subscribe``,
    true exactly when :func:`plan` would grant something of it to this caller."""
    if listening is None or not policy.decide_method(who, "subscriptions/listen").allowed:
        return {}
    offers = listening.listen_offers()
    if not any(o.list_changed or o.subscribe for o in offers):
        return {}
    everything = ListenFilter(tools=True, prompts=True, resources=True)
    granted = plan(policy, who, everything, offers, backend)
    out: dict[str, dict[str, bool]] = {
        kind: {"listChanged": any(getattr(g, kind) for g in granted.values())}
        for kind in ("tools", "prompts", "resources")
    }
    surface = backend.surface()
    subscribing = {o.backend for o in offers if o.subscribe}
    out["resources"]["subscribe"] = any(
        r.backend in subscribing and policy.decide_resource(who, r.uri).allowed
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
    for key, kind in _FILTER_KEYS.items():
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
    return ListenFilter(uris=tuple(dict.fromkeys(uris)), **flags)


# --- the replica's open streams ---------------------------------------------------------------


@dataclass(eq=False)
class _Open:
    subject: str
    uris: int
    queue: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)


class SubscriptionHub:
    """Every open listen stream of this replica: the bounds, policy reloads and the drain."""

    def __init__(self, limits: Limits, policy: PolicySource | None) -> None:
        self._max = limits.max_subscriptions
        self._per_principal = limits.max_subscriptions_per_principal
        self._uris_per_principal = limits.max_subscribed_uris_per_principal
        self.lifetime_s = limits.subscription_lifetime_s
        self._policy = policy
        self._open: set[_Open] = set()
        self._streams: dict[str, int] = {}
        self._uris: dict[str, int] = {}
        self._watch: asyncio.Task[None] | None = None
        self.draining = False

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, subject: str, uris: int) -> _Open:
        """Take a stream slot for ``subject`` or raise the row of the bound it passes."""
        if self.draining or len(self._open) >= self._max:
            raise OverCapacity(retry_after=1)
        if (
            self._streams.get(subject, 0) >= self._per_principal
            or self._uris.get(subject, 0) + uris > self._uris_per_principal
        ):
            raise TooManySubscriptions()
        slot = _Open(subject, uris)
        self._open.add(slot)
        self._streams[subject] = self._streams.get(subject, 0) + 1
        self._uris[subject] = self._uris.get(subject, 0) + uris
        if self._watch is None and self._policy is not None:
            self._watch = asyncio.create_task(self._watch_policy(), name="subscription-policy")
        return slot

    def release(self, slot: _Open) -> None:
        if slot not in self._open:
            return
        self._open.discard(slot)
        for counts, n in ((self._streams, 1), (self._uris, slot.uris)):
            left = counts.get(slot.subject, 0) - n
            if left > 0:
                counts[slot.subject] = left
            else:
                counts.pop(slot.subject, None)

    def drain(self) -> None:
        """A graceful stop began: every stream ends with the graceful result now."""
        self.draining = True
        for slot in self._open:
            slot.queue.put_nowait(("drain", None))

    async def _watch_policy(self) -> None:
        assert self._policy is not None
        last = self._policy.current()
        try:
            while self._open:
                await asyncio.sleep(RELOAD_POLL_S)
                current = self._policy.current()
                if current is not last:
                    last = current
                    for slot in self._open:
                        slot.queue.put_nowait(("reload", current))
        finally:
            self._watch = None


# --- the route -------------------------------------------------------------------------------


class SubscriptionRoutes:
    """The ``subscriptions/listen`` route (2026-07-28 only)."""

    def __init__(
        self,
        *,
        limits: Limits,
        backend: Backend,
        listening: Listening | None,
        policy: PolicySource | None,
        detach: Callable[[RequestContext], None] | None,
    ) -> None:
        self._backend = backend
        self._listening = listening
        self._detach = detach
        self._max_uris = limits.max_subscribed_uris_per_principal
        self._source = policy
        self.hub = SubscriptionHub(limits, policy)

    def routes(self) -> dict[str, Route]:
        return {
            "subscriptions/listen": Route(_never, eras=frozenset({"modern"}), stream=self._listen)
        }

    async def _listen(self, message: McpMessage, turn: Turn) -> web.StreamResponse:
        listening = self._listening
        offers = listening.listen_offers() if listening is not None else ()
        if listening is None or not any(o.list_changed or o.subscribe for o in offers):
            raise MethodNotFound()
        require_method_scopes(turn, message.method)
        wanted = parse_filter(message.params, self._max_uris)
        who = turn.principal
        slot = self.hub.admit(who.subject, len(wanted.uris))
        try:
            granted = plan(turn.policy, who, wanted, offers, self._backend)
            check_expiry(turn)
            lifetime = min(self.hub.lifetime_s, max(0.0, who.expires_at - time.time()))
            ends_at = time.monotonic() + lifetime
            async with contextlib.AsyncExitStack() as stack:
                opened: dict[str, UpstreamListen] = {}
                for name, part in granted.items():
                    try:
                        opened[name] = await stack.enter_async_context(
                            listening.listen(
                                name, part, ack_deadline=turn.deadline, deadline=ends_at + 5.0
                            )
                        )
                    except ListenRefused as refused:
                        _log.info("subscription_backend_refused", backend=name, kind=refused.kind)
                honoured = {
                    name: _intersect(granted[name], up.acknowledged) for name, up in opened.items()
                }
                stream = _Stream(turn, message, slot, honoured, wanted, self._source)
                return await stream.run(opened, ends_at, self._detach, self._backend)
        finally:
            self.hub.release(slot)


async def _never(
    message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
) -> bytes:
    raise MethodNotFound()  # a listen inside a 2025-03-26 batch: there is none on that era


def _intersect(asked: ListenFilter, acked: ListenFilter) -> ListenFilter:
    got = set(acked.uris)
    return ListenFilter(
        tools=asked.tools and acked.tools,
        prompts=asked.prompts and acked.prompts,
        resources=asked.resources and acked.resources,
        uris=tuple(u for u in asked.uris if u in got),
    )


class _Stream:
    """One client's open stream: the acknowledgment, the relay, the end."""

    def __init__(  # noqa: PLR0917 - built in one place, from the route
        self,
        turn: Turn,
        message: McpMessage,
        slot: _Open,
        honoured: dict[str, ListenFilter],
        wanted: ListenFilter,
        source: PolicySource | None,
    ) -> None:
        self._turn = turn
        self._source = source
        self._id = message.id
        self._slot = slot
        self._honoured = honoured
        self._wanted = wanted
        self._policy = turn.policy
        self._meta = {SUBSCRIPTION_ID: message.id}
        self._response = web.StreamResponse(status=200, headers=SSE_HEADERS)

    async def run(
        self,
        opened: dict[str, UpstreamListen],
        ends_at: float,
        detach: Callable[[RequestContext], None] | None,
        backend: Backend,
    ) -> web.StreamResponse:
        turn, response = self._turn, self._response
        await response.prepare(turn.request)
        turn.ctx.status = 200
        if detach is not None:
            detach(turn.ctx)
        pumps = [
            asyncio.create_task(self._pump(name, up), name=f"subscription-pump:{name}")
            for name, up in opened.items()
        ]
        graceful = True
        try:
            await self._send(_notification(_ACK, self._meta, notifications=self._acked()))
            graceful = await self._relay(ends_at, backend)
        except ConnectionError:
            graceful = False  # the client went away: nobody to answer
            return response
        finally:
            for task in pumps:
                task.cancel()
            for task in pumps:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        with contextlib.suppress(ConnectionError):
            if graceful:
                end = {"resultType": "complete", "_meta": dict(self._meta)}
                await self._send({"jsonrpc": "2.0", "id": self._id, "result": end})
            await response.write_eof()
        return response

    async def _relay(self, ends_at: float, backend: Backend) -> bool:
        """Pass notifications on until the stream ends; True for a graceful end."""
        queue = self._slot.queue
        open_backends = len(self._honoured)
        while True:
            left = ends_at - time.monotonic()
            if left <= 0:
                return True
            try:
                kind, value = await asyncio.wait_for(queue.get(), min(left, KEEPALIVE_S))
            except TimeoutError:
                if time.monotonic() < ends_at:
                    await self._write(b": keepalive\n\n")
                continue
            if kind == "drain":
                return True
            if kind == "overflow":
                return False
            if kind == "reload":
                if self._shrunk(value, backend):
                    _log.info("subscription_ended_by_policy")
                    return True
                self._policy = value
                continue
            name, event = value
            assert isinstance(event, ListenEvent)
            if event.kind == "end":
                open_backends -= 1
                if not event.graceful or open_backends <= 0:
                    return event.graceful
                continue
            out = self._outgoing(name, event)
            if out is not None:
                await self._send(out)

    def _outgoing(self, name: str, event: ListenEvent) -> dict[str, Any] | None:
        honoured = self._honoured.get(name)
        if honoured is None:
            return None
        if event.kind == "updated":
            uri = event.uri
            if not honoured.uris or uri is None:
                return None
            # Only what the caller may read under the policy in force now (a reload the hub
            # has not reported yet included).
            policy = self._source.current() if self._source is not None else self._policy
            if not policy.decide_resource(self._turn.principal, uri).allowed:
                return None
            return _notification("notifications/resources/updated", self._meta, uri=uri)
        if not getattr(honoured, event.kind):
            return None
        return _notification(_LIST_CHANGED[event.kind], self._meta)

    def _shrunk(self, policy: Policy, backend: Backend) -> bool:
        """Whether the new policy takes away something the acknowledgment granted."""
        who = self._turn.principal
        if not who.scopes.issuperset(policy.baseline_scopes):
            return True
        if not policy.decide_method(who, "subscriptions/listen").allowed:
            return True
        offers = [
            ListenOffer(name, frozenset(("tools", "prompts", "resources")), subscribe=True)
            for name in self._honoured
        ]
        now = plan(policy, who, self._wanted, offers, backend)
        for name, had in self._honoured.items():
            got = now.get(name, ListenFilter())
            if any(getattr(had, k) and not getattr(got, k) for k in _LIST_CHANGED):
                return True
            if not set(had.uris) <= set(got.uris):
                return True
        return False

    async def _pump(self, name: str, up: UpstreamListen) -> None:
        queue = self._slot.queue
        try:
            async for event in up.events():
                if queue.qsize() >= MAX_QUEUED:
                    queue.put_nowait(("overflow", None))
                    return
                queue.put_nowait(("event", (name, event)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a backend stream that broke: an abrupt end for the client
            _log.info("subscription_backend_lost", backend=name, kind=type(exc).__name__)
            queue.put_nowait(("event", (name, ListenEvent("end"))))

    def _acked(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, kind in _FILTER_KEYS.items():
            if any(getattr(h, kind) for h in self._honoured.values()):
                out[key] = True
        got = {u for h in self._honoured.values() for u in h.uris}
        uris = [u for u in self._wanted.uris if u in got]
        if uris:
            out["resourceSubscriptions"] = uris
        return out

    async def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        await self._write(b"event: message\ndata: " + data + b"\n\n")

    async def _write(self, chunk: bytes) -> None:
        self._turn.ctx.bytes_out += len(chunk)
        await self._response.write(chunk)


def _notification(method: str, meta: Mapping[str, Any], **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": {"_meta": dict(meta), **params}}
