"""One client's open ``subscriptions/listen`` stream: the acknowledgment, the relay, the end.

Each backend notification is passed on only when the acknowledgment covers it,
``notifications/resources/updated`` only when the caller may read that URI under the stream's
current policy (the spec allows a sub-resource URI), ``notifications/tasks`` as
:mod:`gateway.http.subscriptions.task_listen` decides (under the caller's own handle). The stream
ends:

- when the client goes away (every backend stream is closed with it);
- with the graceful ``subscriptions/listen`` result (§Graceful Closure) at
  ``limits.subscription_lifetime_s`` or the token's expiry, when the token is revoked (here or
  on another replica: the next listen with it is 401), at a graceful stop (drain), and
  after a policy reload that takes away anything the acknowledgment granted (the client
  listens again and gets what the new policy allows);
- when a backend ends its stream: gracefully if the backend did, abruptly otherwise (the client
  MAY reconnect, §Graceful Closure).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Final

from aiohttp import web

from gateway.http.sse import SSE_HEADERS, json_event
from gateway.http.subscriptions.subscription_hub import Slot
from gateway.http.subscriptions.subscription_plan import (
    FILTER_KEYS,
    plan,
    relayed_method,
)
from gateway.http.subscriptions.task_listen import TaskWatch
from gateway.http.turn import Turn
from gateway.observability.logging import get_logger
from gateway.protocol.messages import LIST_CHANGED, McpMessage
from gateway.seams import (
    Backend,
    ListenEvent,
    ListenFilter,
    ListenOffer,
    Policy,
    PolicySource,
    RequestContext,
    UpstreamListen,
)

__all__ = ["MAX_QUEUED", "SUBSCRIPTION_ID", "ListenStream"]

SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
MAX_QUEUED: Final = 256
"""Notifications waiting for one client; a client that stops reading is ended at the cap."""
_ACK: Final = "notifications/subscriptions/acknowledged"

_log = get_logger("gateway.http.subscriptions")


class ListenStream:
    """One client's open stream: the acknowledgment, the relay, the end."""

    def __init__(  # noqa: PLR0917 - built in one place, from the route
        self,
        turn: Turn,
        message: McpMessage,
        slot: Slot,
        honoured: dict[str, ListenFilter],
        wanted: ListenFilter,
        source: PolicySource | None,
        tasks: TaskWatch | None = None,
    ) -> None:
        self._turn = turn
        self._tasks = tasks
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
        open_backends = len(self._honoured)
        while (item := await self._slot.next(ends_at, self._write)) is not None:
            kind, value = item
            if kind in ("drain", "revoked"):
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
        return True  # the stream's lifetime is over

    def _outgoing(self, name: str, event: ListenEvent) -> dict[str, Any] | None:
        honoured, policy, source = self._honoured.get(name), self._policy, self._source
        if event.kind == "task":
            if self._tasks is None or event.task is None:
                return None
            now = source.current() if source is not None else policy
            return self._tasks.notification(name, event.task, now, self._meta)
        method = relayed_method(self._turn, name, event, honoured, policy=policy, source=source)
        if method is None:
            return None
        if event.kind == "updated":
            return _notification(method, self._meta, uri=event.uri)
        return _notification(method, self._meta)

    def _shrunk(self, policy: Policy, backend: Backend) -> bool:
        """Whether the new policy takes away something the acknowledgment granted."""
        who = self._turn.principal
        if not who.scopes.issuperset(policy.baseline_scopes):
            return True
        if not policy.decide_method(who, "subscriptions/listen").allowed:
            return True
        if self._tasks is not None and not self._tasks.allowed_under(policy):
            return True
        offers = [
            ListenOffer(name, frozenset(("tools", "prompts", "resources")), subscribe=True)
            for name in self._honoured
        ]
        now = plan(policy, who, self._wanted, offers, backend, client_ip=self._turn.ctx.client_ip)
        for name, had in self._honoured.items():
            got = now.get(name, ListenFilter())
            if any(getattr(had, k) and not getattr(got, k) for k in LIST_CHANGED):
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
        for key, kind in FILTER_KEYS.items():
            if any(getattr(h, kind) for h in self._honoured.values()):
                out[key] = True
        got = {u for h in self._honoured.values() for u in h.uris}
        uris = [u for u in self._wanted.uris if u in got]
        if uris:
            out["resourceSubscriptions"] = uris
        handles = self._tasks.acknowledged() if self._tasks is not None else []
        if handles:
            out["taskIds"] = handles
        return out

    async def _send(self, message: dict[str, Any]) -> None:
        await self._write(json_event(message))

    async def _write(self, chunk: bytes) -> None:
        self._turn.ctx.bytes_out += len(chunk)
        await self._response.write(chunk)


def _notification(method: str, meta: Mapping[str, Any], **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": {"_meta": dict(meta), **params}}
