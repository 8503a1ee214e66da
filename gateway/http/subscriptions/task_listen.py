"""Task status notifications on a caller's listen stream (the tasks extension).

SEP-2663 §Task Status Notifications (ext-tasks ``specification/draft/tasks.md``): a client that
declared ``io.modelcontextprotocol/tasks`` names the tasks it wants to hear about in
``notifications.taskIds`` of a ``subscriptions/listen`` (without the extension: -32021, MUST;
:func:`gateway.protocol.tasks_extension.check_task_listen`); the acknowledgment lists those the
server agreed to; each ``notifications/tasks`` carries the complete ``DetailedTask``, identical to
what ``tasks/get`` would have returned at that moment. ``notifications/progress`` and
``notifications/message`` MUST NOT be sent for a task: none is ever relayed for one.

Through the gateway a task id is the caller's sealed handle. Each named handle is checked as a
task request's is (:class:`gateway.http.task_access.TaskAccess`): it opens, is the caller's and
unexpired, its backend is still configured and advertises the extension, and the policy (then
the external decision point) still lets the caller call its tool as a task. A handle that fails
is left out of the acknowledgment exactly as a made-up one is (the acknowledgment is "the subset
the server agreed to honor", subscriptions.mdx §Acknowledgment), nothing is asked upstream about
it, and why is logged with the handle's digest (``task_listen_refused``). The others are asked of
their backends by the backend's own ids (:attr:`gateway.seams.ListenFilter.task_ids`), each
backend's acknowledgment is kept, and every ``notifications/tasks`` it sends is mapped back to
the caller's own handle (the text it named) and rebuilt like a ``tasks/get`` answer
(:func:`gateway.http.task_access.task_view`). A notification is dropped when its task is not one
this stream acknowledged, the handle has expired since, the policy in force no longer lets the
caller call the tool as a task, or its input requests need a capability the listen did not
declare (``tasks/get`` would have answered -32021).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gateway.config import Config
from gateway.errors import InvalidParams, MissingClientCapability, TooManySubscriptions
from gateway.http.task_access import TaskAccess, runs_as_task, task_view
from gateway.http.turn import Turn
from gateway.observability.logging import get_logger
from gateway.protocol.task_handle import HandleRefused, TaskClaims, handle_digest
from gateway.seams import ListenFilter, ListenOffer, Policy, Task

__all__ = ["TASK_STATUS", "TaskWatch", "TaskWatcher", "parse_task_ids"]

TASK_STATUS: Final = "notifications/tasks"

_log = get_logger("gateway.http.subscriptions")


def parse_task_ids(params: Mapping[str, Any], max_ids: int) -> tuple[str, ...]:
    """``params.notifications.taskIds``: an array of strings (``invalid_params`` otherwise), at
    most ``max_ids`` of them (``too_many_subscriptions``), each once, in the client's order."""
    wanted = params.get("notifications")
    raw = wanted.get("taskIds") if isinstance(wanted, Mapping) else None
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(i, str) for i in raw):
        raise InvalidParams(detail="taskIds")
    if len(raw) > max_ids:
        raise TooManySubscriptions()
    return tuple(dict.fromkeys(raw))


@dataclass(frozen=True, slots=True)
class _Watched:
    handle: str
    """The caller's handle, as it named it (what every notification carries back)."""
    claims: TaskClaims


class TaskWatcher:
    """Decides which of a listen's task handles it may hear about (one per dispatcher)."""

    def __init__(
        self, config: Config, access: TaskAccess, clock: Callable[[], float] = time.time
    ) -> None:
        self._access = access
        self._config = config
        self._clock = clock

    async def watch(
        self,
        handles: Sequence[str],
        turn: Turn,
        offers: Sequence[ListenOffer],
        capabilities: Mapping[str, Any],
    ) -> TaskWatch:
        """The named ``handles`` this caller may hear about (module docstring), by backend;
        ``capabilities``: what the listen request declares."""
        backends = {offer.backend for offer in offers if offer.tasks}
        watched: dict[str, dict[str, _Watched]] = {}
        for handle in handles:
            try:
                claims = self._access.open(handle, turn.principal)
                if claims.backend not in backends:
                    raise HandleRefused("backend")
                await self._access.authorize(claims, turn, record=False)
            except HandleRefused as refused:
                _log.info(
                    "task_listen_refused", handle=handle_digest(handle), reason=refused.reason
                )
                continue
            own = watched.setdefault(claims.backend, {})
            own.setdefault(claims.upstream_id, _Watched(handle, claims))
        return TaskWatch(handles, watched, turn, capabilities, self._config, self._clock)


class TaskWatch:
    """One stream's tasks: per backend, the backend's task id -> the caller's handle."""

    def __init__(  # noqa: PLR0917 - built in one place, by TaskWatcher
        self,
        named: Sequence[str],
        watched: dict[str, dict[str, _Watched]],
        turn: Turn,
        capabilities: Mapping[str, Any],
        config: Config,
        clock: Callable[[], float],
    ) -> None:
        self._named = tuple(named)
        self._watched = watched
        self._turn = turn
        self._capabilities = capabilities
        self._server = config.server
        self._min_poll_ms = config.tasks.min_poll_interval_ms
        self._clock = clock

    def asked(self) -> dict[str, tuple[str, ...]]:
        """Backend -> the backend's own ids to ask it for."""
        return {name: tuple(own) for name, own in self._watched.items()}

    def honour(self, acknowledged: Mapping[str, ListenFilter]) -> None:
        """Keep only what each backend acknowledged (a backend not opened: nothing)."""
        for name in list(self._watched):
            agreed = set(acknowledged[name].task_ids) if name in acknowledged else set()
            kept = {i: w for i, w in self._watched[name].items() if i in agreed}
            if kept:
                self._watched[name] = kept
            else:
                del self._watched[name]

    def acknowledged(self) -> list[str]:
        """The handles agreed to, as the client named them and in its order."""
        honoured = {w.handle for own in self._watched.values() for w in own.values()}
        return [handle for handle in self._named if handle in honoured]

    def allowed_under(self, policy: Policy) -> bool:
        """Whether ``policy`` still lets the caller hear about every task agreed to."""
        who, client_ip = self._turn.principal, self._turn.ctx.client_ip
        return all(
            runs_as_task(policy, who, w.claims, client_ip=client_ip)
            for own in self._watched.values()
            for w in own.values()
        )

    def notification(
        self, backend: str, task: Task, policy: Policy, meta: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """The ``notifications/tasks`` for the client, or None when it is not passed on."""
        watched = self._watched.get(backend, {}).get(task.task_id)
        if watched is None:
            return None  # not one this caller named and owns
        claims = watched.claims
        who, client_ip = self._turn.principal, self._turn.ctx.client_ip
        if not self._clock() < claims.expires_at:
            return None
        if not runs_as_task(policy, who, claims, client_ip=client_ip):
            return None
        try:
            params = task_view(
                task,
                claims,
                watched.handle,
                capabilities=self._capabilities,
                server=self._server,
                min_poll_ms=self._min_poll_ms,
            )
        except MissingClientCapability:
            return None
        del params["resultType"]  # a notification's params are the task, not a result
        params["_meta"] = dict(meta)
        return {"jsonrpc": "2.0", "method": TASK_STATUS, "params": params}
