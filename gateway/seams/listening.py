"""The listen streams of subscriptions: what one ``subscriptions/listen`` asks a backend for,
what comes back, and the :class:`Listening` Protocol (``gateway/backend/federated_listen.py``).
2026-07-28 basic/patterns/subscriptions.mdx."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol

from gateway.seams.task_relay import Task

__all__ = [
    "ListenEvent",
    "ListenFilter",
    "ListenOffer",
    "ListenRefused",
    "Listening",
    "UpstreamListen",
]


@dataclass(frozen=True, slots=True)
class ListenFilter:
    """What one ``subscriptions/listen`` asks a backend for (or what it acknowledged):
    2026-07-28 basic/patterns/subscriptions.mdx §Notification Filter."""

    tools: bool = False
    prompts: bool = False
    resources: bool = False
    uris: tuple[str, ...] = ()
    """``resourceSubscriptions``: exposed URIs (the gateway's form with several backends)."""
    task_ids: tuple[str, ...] = ()
    """``taskIds`` (the tasks extension, SEP-2663 §Task Status Notifications): the backend's
    own task ids, restored by the front door from the caller's handles (it maps each
    notification back to the caller's handle; the backend's id never reaches a client)."""

    @property
    def empty(self) -> bool:
        return not (self.tools or self.prompts or self.resources or self.uris or self.task_ids)


@dataclass(frozen=True, slots=True)
class ListenOffer:
    """What one backend can send on a listen stream (its 2026-07-28 capabilities)."""

    backend: str
    list_changed: frozenset[str]
    """Of ``tools``, ``prompts``, ``resources``: the kinds whose ``listChanged`` it advertised."""
    subscribe: bool
    """It advertised ``resources.subscribe``."""
    tasks: bool = False
    """It advertised the tasks extension: it may be asked for ``notifications/tasks``."""


@dataclass(frozen=True, slots=True)
class ListenEvent:
    """One notification from a backend's listen stream, in the exposed names.

    ``kind``: ``tools`` / ``prompts`` / ``resources`` (a ``list_changed``), ``updated``
    (``notifications/resources/updated`` of ``uri``), ``task`` (``notifications/tasks`` about
    an acknowledged task: ``task``, checked, with the backend's own id), or ``end`` (the backend
    ended the stream; ``graceful`` when it answered the listen request first)."""

    kind: Literal["tools", "prompts", "resources", "updated", "task", "end"]
    uri: str | None = None
    graceful: bool = False
    task: Task | None = None


class UpstreamListen(Protocol):
    """An open listen stream at one backend (with the gateway's own credential)."""

    acknowledged: ListenFilter
    """What the backend agreed to honour (exposed URIs)."""

    def events(self) -> AsyncIterator[ListenEvent]:
        """The stream's notifications; the last is an ``end`` event, or it raises on a
        transport failure."""
        ...


class Listening(Protocol):
    """**Protocol:** backends' listen streams (``gateway/backend/federation.py``)."""

    def listen_offers(self) -> tuple[ListenOffer, ...]: ...

    def listen(
        self, backend: str, wanted: ListenFilter, *, ack_deadline: float, deadline: float
    ) -> AbstractAsyncContextManager[UpstreamListen]:
        """Open a listen at ``backend`` for ``wanted``, wait for its acknowledgment until
        ``ack_deadline``; the stream ends at ``deadline`` at the latest. Raises
        :class:`ListenRefused` when the backend cannot listen or fails before acknowledging."""
        ...


class ListenRefused(Exception):
    """A backend did not acknowledge a listen (refused, unreachable, garbled)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind
