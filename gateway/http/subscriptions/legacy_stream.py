"""A legacy session's GET stream (2025-06-18 basic/transports.mdx §Listening for Messages from
the Server) and its ``DELETE`` (§Session Management 5).

While the GET is attached the gateway holds, per backend, one listen (the 2026 path's
:class:`gateway.seams.Listening`, with the gateway's own credential) for what
:func:`~gateway.http.subscriptions.subscription_plan.plan` grants this caller: the ``list_changed``
kinds it sees and the session's URIs it may read. A ``resources/subscribe`` / ``unsubscribe`` or a
policy reload re-plans; a backend whose filter changed gets a new listen, opened before the old one
is closed (an update may arrive twice, none is lost in between). Notifications go out as the 2025
revisions define them (no ``_meta`` subscription id), ``notifications/resources/updated`` only for a
URI the caller may read under the policy in force.

The stream ends (the session stays, the client reconnects: transports.mdx "the server MAY close
the SSE stream at any time") at ``limits.subscription_lifetime_s`` or the token's expiry, when
the token is revoked (here or on another replica), when a backend ends its listen, when a
newer GET of the same session attaches, and when a client stops reading
(:data:`~gateway.http.subscriptions.listen_stream.MAX_QUEUED`). It ends with the session at a reload
that takes away the baseline or the subscription method's scopes, at ``DELETE`` and at a
graceful stop. The stream never carries a JSON-RPC response (§Listening 4).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiohttp import web

from gateway.errors import OverCapacity, SessionNotFound, StreamNotAcceptable
from gateway.http.admission import accepts_event_stream
from gateway.http.sse import SSE_HEADERS, json_event
from gateway.http.subscriptions.legacy_sessions import (
    SESSION_HEADER,
    SUBSCRIPTION_METHOD,
    LegacySession,
    LegacySessions,
    Subscribed,
)
from gateway.http.subscriptions.listen_stream import MAX_QUEUED
from gateway.http.subscriptions.subscription_plan import intersect, plan, relayed_method
from gateway.http.turn import Turn, check_expiry, require_method_scopes
from gateway.observability.logging import get_logger
from gateway.seams import (
    ListenEvent,
    ListenFilter,
    Listening,
    ListenRefused,
    Policy,
    PolicySource,
    RequestContext,
    UpstreamListen,
)

__all__ = ["serve_session"]

EMPTY: Final = {"Cache-Control": "no-store"}

_log = get_logger("gateway.http.legacy_stream")


async def serve_session(
    sessions: LegacySessions,
    turn: Turn,
    *,
    source: PolicySource | None,
    detach: Callable[[RequestContext], None] | None,
) -> web.StreamResponse:
    """A GET or DELETE on the MCP path carrying ``Mcp-Session-Id`` (authenticated already)."""
    request, ctx = turn.request, turn.ctx
    ctx.era, ctx.method = "legacy", f"session/{request.method.lower()}"
    raw = request.headers.get(SESSION_HEADER)
    if request.method == "DELETE":
        sessions.end_id(raw, turn.principal)
        return web.Response(status=204, headers=EMPTY)
    if not accepts_event_stream(request.headers.getall("Accept", ())):
        raise StreamNotAcceptable()
    require_method_scopes(turn, SUBSCRIPTION_METHOD)
    session = sessions.session(raw, turn.principal)
    try:
        check_expiry(turn)
        if sessions.hub.draining or sessions.listening is None:
            raise OverCapacity(retry_after=1)
        stream = _SessionStream(sessions, sessions.listening, session, turn, source)
        return await stream.run(detach)
    finally:
        sessions.settle(session)  # no URI: nothing is held once the stream is gone


@dataclass(eq=False)
class _Up:
    """One backend's listen for this stream."""

    asked: ListenFilter
    listen: UpstreamListen
    stack: contextlib.AsyncExitStack
    pump: asyncio.Task[None] | None = None

    async def close(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.pump
        with contextlib.suppress(Exception):
            await self.stack.aclose()


class _SessionStream:
    """One attached GET: its listens, the relay, the end."""

    def __init__(
        self,
        sessions: LegacySessions,
        listening: Listening,
        session: LegacySession,
        turn: Turn,
        source: PolicySource | None,
    ) -> None:
        self._sessions = sessions
        self._listening = listening
        self._session = session
        self._turn = turn
        self._source = source
        self._policy = turn.policy
        self._ups: dict[str, _Up] = {}
        self._honoured: dict[str, ListenFilter] = {}
        self._response = web.StreamResponse(
            status=200, headers={**SSE_HEADERS, SESSION_HEADER: session.id}
        )

    async def run(self, detach: Callable[[RequestContext], None] | None) -> web.StreamResponse:
        session, turn, hub = self._session, self._turn, self._sessions.hub
        previous, me = session.stream, asyncio.current_task()
        session.stream = me  # claimed before any wait: a replaced stream leaves it to this one
        if session.idle is not None:
            session.idle.cancel()
            session.idle = None
        attached = False
        try:
            if previous is not None and not previous.done():
                previous.cancel()  # a newer GET of the session replaces it (half-dead connection)
                await asyncio.wait({previous}, timeout=2.0)
            if session.ended:  # ended while this GET waited (DELETE, reload, drain)
                raise SessionNotFound()
            token = turn.token_key()  # 401 if revoked meanwhile; bound with no wait in between
            hub.attach(session.slot)  # a stream of the replica and of the principal: 503 / 429
            attached = True
            hub.bind(session.slot, token)
            pending = self._stale_events()
            who = turn.principal
            lifetime = min(hub.lifetime_s, max(0.0, who.expires_at - time.time()))
            ends_at = time.monotonic() + lifetime
            await self._response.prepare(turn.request)
            turn.ctx.status = 200
            if detach is not None:
                detach(turn.ctx)
            outcome = await self._apply(turn.deadline, ends_at)
            _settle(pending, outcome)
            await self._relay(ends_at)
        except ConnectionError:
            pass  # the client went away
        finally:
            for up in self._ups.values():
                await up.close()
            self._ups.clear()
            if attached:
                hub.detach(session.slot)
            if session.stream is me:
                session.stream = None
                hub.bind(session.slot, None)
                _settle(self._stale_events(), None)
        with contextlib.suppress(ConnectionError):
            await self._response.write_eof()
        return self._response

    def _stale_events(self) -> list[asyncio.Future[Subscribed | None]]:
        """Empty the slot's queue (events for no stream); the subscribes waiting on a refilter."""
        queue, waiting = self._session.slot.queue, []
        while not queue.empty():
            kind, value = queue.get_nowait()
            if kind == "refilter" and value is not None:
                waiting.append(value[0])
        return waiting

    async def _relay(self, ends_at: float) -> None:
        while (item := await self._session.slot.next(ends_at, self._write)) is not None:
            kind, value = item
            if kind in ("drain", "end", "overflow", "revoked"):
                return
            if kind == "reload":
                self._policy = value
                if not self._still_allowed(value):
                    _log.info("legacy_session_ended_by_policy")
                    self._sessions.end(self._session)
                    return
                await self._apply(time.monotonic() + self._sessions.ack_window_s, ends_at)
            elif kind == "refilter":
                done, deadline = value if value is not None else (None, None)
                window = time.monotonic() + self._sessions.ack_window_s
                outcome = await self._apply(deadline or window, ends_at)
                _settle([done] if done is not None else [], outcome)
            elif kind == "event":
                name, up, event = value
                if event.kind == "end":
                    if self._ups.get(name) is not up:
                        continue  # a listen since replaced (closed by us)
                    return  # the client reconnects; the session keeps its subscriptions
                # From the current listen, or one replaced since it queued this (what it
                # heard before the new one was acknowledged): filtered by what holds now.
                out = self._outgoing(name, event)
                if out is not None:
                    await self._send(out)

    def _still_allowed(self, policy: Policy) -> bool:
        who = self._turn.principal
        return (
            who.scopes.issuperset(policy.baseline_scopes)
            and policy.decide_method(who, SUBSCRIPTION_METHOD).allowed
        )

    async def _apply(self, ack_deadline: float, ends_at: float) -> Subscribed:
        """Re-plan under the current policy; (re)open the listens whose filter changed."""
        session, who = self._session, self._turn.principal
        wanted = ListenFilter(tools=True, prompts=True, resources=True, uris=tuple(session.uris))
        offers = self._listening.listen_offers()
        granted = plan(
            self._policy,
            who,
            wanted,
            offers,
            self._sessions.backend,
            client_ip=self._turn.ctx.client_ip,
        )
        refused: set[str] = set()
        for name, want in granted.items():
            current = self._ups.get(name)
            if current is not None and current.asked == want:
                continue
            try:
                self._ups[name] = await self._open(name, want, ack_deadline, ends_at)
            except ListenRefused as refusal:
                _log.info("subscription_backend_refused", backend=name, kind=refusal.kind)
                refused.add(name)
                continue
            if current is not None:
                await current.close()
        for name in [n for n in self._ups if n not in granted]:
            await self._ups.pop(name).close()
        ups = self._ups.items()
        self._honoured = {n: intersect(up.asked, up.listen.acknowledged) for n, up in ups}
        acknowledged = {u for h in self._honoured.values() for u in h.uris}
        kept = acknowledged | _uris_of(granted, refused)
        for uri in [u for u in session.uris if u not in kept]:
            self._sessions.forget(session, uri)  # no longer readable, or the backend declined it
        return Subscribed(frozenset(acknowledged), frozenset(refused))

    async def _open(self, name: str, want: ListenFilter, ack: float, ends_at: float) -> _Up:
        stack = contextlib.AsyncExitStack()
        try:
            listen = await stack.enter_async_context(
                self._listening.listen(name, want, ack_deadline=ack, deadline=ends_at + 5.0)
            )
        except BaseException:
            await stack.aclose()
            raise
        up = _Up(want, listen, stack)
        up.pump = asyncio.create_task(self._pump(name, up), name=f"legacy-subscription:{name}")
        return up

    async def _pump(self, name: str, up: _Up) -> None:
        queue = self._session.slot.queue
        try:
            async for event in up.listen.events():
                if queue.qsize() >= MAX_QUEUED:
                    queue.put_nowait(("overflow", None))
                    return
                queue.put_nowait(("event", (name, up, event)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a backend stream that broke: the client reconnects
            _log.info("subscription_backend_lost", backend=name, kind=type(exc).__name__)
            queue.put_nowait(("event", (name, up, ListenEvent("end"))))

    def _outgoing(self, name: str, event: ListenEvent) -> dict[str, Any] | None:
        honoured, policy, source = self._honoured.get(name), self._policy, self._source
        method = relayed_method(self._turn, name, event, honoured, policy=policy, source=source)
        if method is None:
            return None
        if event.kind == "updated":  # the 2025 shape: no _meta subscription id
            return {"jsonrpc": "2.0", "method": method, "params": {"uri": event.uri}}
        return {"jsonrpc": "2.0", "method": method}

    async def _send(self, message: dict[str, Any]) -> None:
        await self._write(json_event(message))

    async def _write(self, chunk: bytes) -> None:
        self._turn.ctx.bytes_out += len(chunk)
        await self._response.write(chunk)


def _uris_of(granted: dict[str, ListenFilter], backends: Sequence[str] | set[str]) -> set[str]:
    """The granted URIs of ``backends`` (kept while their listen could not be reopened)."""
    return {u for name in backends for u in granted.get(name, ListenFilter()).uris}


def _settle(waiting: list[asyncio.Future[Subscribed | None]], outcome: Subscribed | None) -> None:
    for done in waiting:
        if not done.done():
            done.set_result(outcome)
