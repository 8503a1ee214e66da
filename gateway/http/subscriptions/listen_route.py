"""``subscriptions/listen`` (MCP 2026-07-28 basic/patterns/subscriptions.mdx) under the policy.

The client's request opens one SSE stream. The gateway decides, from the request's policy
snapshot, what of the filter this caller may have
(:func:`gateway.http.subscriptions.subscription_plan.plan`), opens one listen per backend concerned
with the gateway's own credential (:class:`gateway.seams.Listening`), waits for each acknowledgment
until the request deadline, and acknowledges the intersection to the client, tagged with the
client's request id (``io.modelcontextprotocol/subscriptionId``). The relay and how the stream ends:
:mod:`gateway.http.subscriptions.listen_stream`; the replica's bounds, reloads and drain:
:mod:`gateway.http.subscriptions.subscription_hub`. An acknowledged stream stops holding an
in-flight slot (it is not work in progress). Task status notifications (``taskIds``, with
``tasks:`` on): :mod:`gateway.http.subscriptions.task_listen`; each task id counts like a URI
against the principal's bound. The legacy era's ``resources/subscribe``:
:mod:`gateway.http.subscriptions.legacy_sessions` (docs/protocol.md#legacy-subscriptions).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace

from aiohttp import web

from gateway.config import Limits
from gateway.errors import MethodNotFound
from gateway.http.progress import ProgressRelay
from gateway.http.subscriptions.listen_stream import ListenStream
from gateway.http.subscriptions.subscription_hub import SubscriptionHub
from gateway.http.subscriptions.subscription_plan import (
    intersect,
    normal_filter,
    parse_filter,
    plan,
)
from gateway.http.subscriptions.task_listen import TaskWatch, TaskWatcher, parse_task_ids
from gateway.http.turn import Route, Turn, check_expiry, require_method_scopes
from gateway.limits.keys import principal_key
from gateway.observability.logging import get_logger
from gateway.protocol.messages import McpMessage
from gateway.protocol.tasks_extension import check_task_listen
from gateway.seams import (
    Backend,
    ListenFilter,
    Listening,
    ListenRefused,
    PolicySource,
    RequestContext,
    UpstreamListen,
)

__all__ = ["SubscriptionRoutes"]

_log = get_logger("gateway.http.subscriptions")


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
        tasks: TaskWatcher | None = None,
    ) -> None:
        """``tasks``: task handles are honoured (``tasks:`` on)."""
        self._backend = backend
        self._tasks = tasks
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
        listening, tasks = self._listening, self._tasks
        offers = listening.listen_offers() if listening is not None else ()
        if listening is None or not any(
            o.list_changed or o.subscribe or (o.tasks and tasks is not None) for o in offers
        ):
            raise MethodNotFound()
        require_method_scopes(turn, message.method)
        check_task_listen(message.params, message.client_capabilities)
        wanted = normal_filter(turn.policy, parse_filter(message.params, self._max_uris))
        handles = parse_task_ids(message.params, self._max_uris) if tasks is not None else ()
        who = turn.principal
        token = turn.token_key()  # 401 if revoked meanwhile; bound below with no wait between
        slot = self.hub.admit(principal_key(who), len(wanted.uris) + len(handles))
        self.hub.bind(slot, token)
        try:
            granted = plan(
                turn.policy, who, wanted, offers, self._backend, client_ip=turn.ctx.client_ip
            )
            watch: TaskWatch | None = None
            if tasks is not None and handles:
                capabilities = message.client_capabilities
                watch = await tasks.watch(handles, turn, offers, capabilities)
                for name, ids in watch.asked().items():
                    granted[name] = replace(granted.get(name, ListenFilter()), task_ids=ids)
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
                    name: intersect(granted[name], up.acknowledged) for name, up in opened.items()
                }
                if watch is not None:
                    watch.honour(honoured)
                stream = ListenStream(turn, message, slot, honoured, wanted, self._source, watch)
                return await stream.run(opened, ends_at, self._detach, self._backend)
        finally:
            self.hub.release(slot)


async def _never(
    message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
) -> bytes:
    raise MethodNotFound()  # a listen inside a 2025-03-26 batch: there is none on that era
