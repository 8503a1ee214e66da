"""A caller's ``subscriptions/listen`` at one backend, opened with the gateway's own credential.

2026-07-28 basic/patterns/subscriptions.mdx: the gateway POSTs ``subscriptions/listen`` with
the filter the front door decided for this caller (in the backend's own URIs), waits for
``notifications/subscriptions/acknowledged`` (the first message carrying our subscription id),
then turns every tagged notification into a :class:`~gateway.seams.ListenEvent`. A JSON-RPC
response to the listen request is the backend's graceful end; a stream that just stops is an
abrupt one. Untagged messages, notifications the backend was not asked for and malformed ones
are dropped (the spec says a server MUST NOT send unrequested types; the gateway does not pass
them on if one does).

Task status notifications (the tasks extension, SEP-2663 §Task Status Notifications): the
``taskIds`` are the backend's own ids (the front door restored them from its callers' handles),
asked with the extension declared on the listen (a backend MUST refuse a listen for task
statuses without it); only the ids the backend acknowledges, and that were asked, are kept. A
``notifications/tasks`` about another id, or whose task does not check like a ``tasks/get``
result (:func:`~gateway.backend.upstream.task_call.checked_task`), is dropped;
``notifications/progress`` and ``notifications/message`` (which MUST NOT be sent for a task) are
dropped like every other type the gateway did not ask for. Since a notification carries the
whole task, a result included, its events may be as large as a response
(``limits.max_response_bytes``).

Only a 2026-07-28 backend is asked: a 2025 one has no ``subscriptions/listen`` (its
``resources/subscribe`` belongs to a session the stateless gateway does not keep), so its
offer is empty. The streams use their own connection pool per backend
(:data:`LISTEN_DESTINATION_SUFFIX`), so held streams never take connections from tools/call.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from gateway.backend.listen.change_listener import SUBSCRIPTION_ID
from gateway.backend.upstream.era import modern_meta
from gateway.backend.upstream.link import UpstreamLink
from gateway.backend.upstream.rpc import UpstreamFault, decode_json, encode_json
from gateway.backend.upstream.sse_parser import SseError, SseParser
from gateway.backend.upstream.task_call import checked_task
from gateway.deadlines import deadline_at
from gateway.observability.logging import get_logger
from gateway.outbound.failures import OutboundError, OutboundTimeout
from gateway.protocol.messages import LIST_CHANGED
from gateway.protocol.tasks_extension import TASKS_EXTENSION, InvalidTask
from gateway.seams import ListenEvent, ListenFilter, ListenRefused, Task

__all__ = ["LISTEN_DESTINATION_SUFFIX", "CallerListen", "Exposure", "open_caller_listen"]

LISTEN_DESTINATION_SUFFIX: Final = "/listen"
MAX_EVENT_BYTES: Final = 65_536
STREAM_MAX_BYTES: Final = 16 * 1_048_576
"""Bytes one caller's upstream stream may carry before it is ended (the client re-listens)."""
_ACK: Final = "notifications/subscriptions/acknowledged"
_TASK_STATUS: Final = "notifications/tasks"
_KINDS: Final = {method: kind for kind, method in LIST_CHANGED.items()}

_log = get_logger("gateway.backend")


@dataclass(frozen=True, slots=True)
class Exposure:
    """How what a backend sends is put into the exposed names (None: refused, dropped)."""

    uri: Callable[[str], str | None]
    """A resource URI."""
    result: Callable[[Mapping[str, Any]], Mapping[str, Any] | None]
    """A completed task's tool result (its resource links)."""


class CallerListen:
    """Implements :class:`gateway.seams.UpstreamListen` over one open upstream response."""

    def __init__(
        self,
        acknowledged: ListenFilter,
        parser: SseParser,
        chunks: AsyncIterator[bytes],
        request_id: int,
        expose: Exposure,
        *,
        backend: str,
    ) -> None:
        self.acknowledged = acknowledged
        self._parser = parser
        self._chunks = chunks
        self._id = request_id
        self._expose = expose
        self._backend = backend
        self._task_ids = frozenset(acknowledged.task_ids)

    async def events(self) -> AsyncIterator[ListenEvent]:
        ack = self.acknowledged
        try:
            async for chunk in self._chunks:
                for message in _messages(self._parser, chunk):
                    if "method" not in message and message.get("id") == self._id:
                        yield ListenEvent("end", graceful="result" in message)
                        return
                    if not _tagged(message, self._id) or "id" in message:
                        continue
                    method = message.get("method")
                    kind = _KINDS.get(method) if isinstance(method, str) else None
                    if kind is not None:
                        if getattr(ack, kind):
                            yield ListenEvent(kind)  # type: ignore[arg-type]
                    elif method == "notifications/resources/updated":
                        uri = _uri(message)
                        exposed = self._expose.uri(uri) if uri is not None else None
                        if exposed is not None and ack.uris:
                            yield ListenEvent("updated", uri=exposed)
                    elif method == _TASK_STATUS and self._task_ids:
                        task = self._task(message.get("params"))
                        if task is not None:
                            yield ListenEvent("task", task=task)
        except OutboundTimeout:
            pass  # the stream's lifetime ended: an abrupt end, the client re-listens
        yield ListenEvent("end")

    def _task(self, params: Any) -> Task | None:
        """A ``notifications/tasks`` about an acknowledged task, checked, or None (dropped)."""
        try:
            task = checked_task(params)
        except InvalidTask as bad:
            _log.warning(
                "backend_notification_dropped",
                backend=self._backend,
                kind="bad_task",
                reason=str(bad),
            )
            return None
        if task.task_id not in self._task_ids:
            return None  # not one this listen asked for and the backend acknowledged
        if task.result is None:
            return task
        exposed = self._expose.result(task.result)
        if exposed is None:
            _log.warning(
                "backend_notification_dropped",
                backend=self._backend,
                kind="bad_result",
                reason="uri in the gateway's own form",
            )
            return None
        return replace(task, result=exposed)


@contextlib.asynccontextmanager
async def open_caller_listen(
    link: UpstreamLink,
    wanted: ListenFilter,
    own_uris: tuple[str, ...],
    *,
    expose: Exposure,
    ack_deadline: float,
    deadline: float,
) -> AsyncIterator[CallerListen]:
    """Open the stream, wait for the acknowledgment (module docstring); ``own_uris``: the
    backend's own URIs for ``wanted.uris``; ``expose`` maps what comes back into the exposed
    names."""
    # After a failure the link forgot its era; detect it again rather than refuse the listen.
    try:
        state = await link.ensure(ack_deadline)
    except (UpstreamFault, OutboundError) as exc:
        raise ListenRefused("not_detected") from exc
    if state.era != "modern":
        raise ListenRefused("legacy")
    request_id = link.next_id()
    notifications: dict[str, Any] = {}
    for kind, key in (
        ("tools", "toolsListChanged"),
        ("prompts", "promptsListChanged"),
        ("resources", "resourcesListChanged"),
    ):
        if getattr(wanted, kind):
            notifications[key] = True
    if own_uris:
        notifications["resourceSubscriptions"] = list(own_uris)
    declared: dict[str, Any] = {}
    max_event = MAX_EVENT_BYTES
    if wanted.task_ids:
        notifications["taskIds"] = list(wanted.task_ids)
        declared = {"extensions": {TASKS_EXTENSION: {}}}  # SEP-2663: MUST, else -32021
        max_event = max(MAX_EVENT_BYTES, link.max_bytes)  # a notification carries the result
    body = encode_json(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "subscriptions/listen",
            "params": {"_meta": modern_meta(capabilities=declared), "notifications": notifications},
        }
    )
    try:
        async with link.open_stream(
            state,
            body=body,
            method="subscriptions/listen",
            deadline=deadline,
            max_body=STREAM_MAX_BYTES,
            destination=link.destination + LISTEN_DESTINATION_SUFFIX,
        ) as response:
            if response.status != 200 or response.content_type != "text/event-stream":
                raise ListenRefused(f"http_{response.status}")
            parser = SseParser(max_line=max_event + 16, max_event=max_event)
            chunks = response.chunks().__aiter__()
            try:
                with deadline_at(ack_deadline):
                    acknowledged = await _acknowledgment(parser, chunks, request_id, expose, wanted)
            except TimeoutError:
                raise ListenRefused("ack_timeout") from None
            yield CallerListen(
                acknowledged, parser, chunks, request_id, expose, backend=link.backend
            )
    except (UpstreamFault, OutboundError, SseError, ValueError) as exc:
        raise ListenRefused(getattr(exc, "kind", type(exc).__name__)) from None


async def _acknowledgment(
    parser: SseParser,
    chunks: AsyncIterator[bytes],
    request_id: int,
    expose: Exposure,
    wanted: ListenFilter,
) -> ListenFilter:
    async for chunk in chunks:
        for message in _messages(parser, chunk):
            if "method" not in message and message.get("id") == request_id:
                raise ListenRefused("answered")  # an error (or an end) instead of an ack
            if message.get("method") != _ACK or not _tagged(message, request_id):
                continue  # subscriptions.mdx: nothing of ours comes before the ack
            params = message.get("params")
            granted = params.get("notifications") if isinstance(params, dict) else None
            if not isinstance(granted, dict):
                raise ListenRefused("garbled")
            raw = granted.get("resourceSubscriptions")
            uris = tuple(
                exposed
                for uri in (raw if isinstance(raw, list) else ())
                if isinstance(uri, str) and (exposed := expose.uri(uri)) is not None
            )
            acked = granted.get("taskIds")
            agreed = {i for i in acked if isinstance(i, str)} if isinstance(acked, list) else set()
            return ListenFilter(
                tools=granted.get("toolsListChanged") is True,
                prompts=granted.get("promptsListChanged") is True,
                resources=granted.get("resourcesListChanged") is True,
                uris=uris,
                task_ids=tuple(i for i in wanted.task_ids if i in agreed),  # only those asked
            )
    raise ListenRefused("closed")


def _messages(parser: SseParser, chunk: bytes) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for event in parser.feed(chunk):
        if event.event != "message" or not event.data:
            continue
        message = decode_json(event.data)
        if isinstance(message, dict):
            out.append(message)
    return out


def _tagged(message: dict[str, Any], request_id: int) -> bool:
    params = message.get("params")
    if "result" in message:
        params = message.get("result")
    meta = params.get("_meta") if isinstance(params, dict) else None
    value = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
    return type(value) is int and value == request_id


def _uri(message: dict[str, Any]) -> str | None:
    params = message.get("params")
    uri = params.get("uri") if isinstance(params, dict) else None
    return uri if isinstance(uri, str) and 0 < len(uri) <= 8192 else None
