"""Upstream change notifications: keep a stream open and refresh the catalog when tools change.

Where an upstream's ``notifications/tools/list_changed`` arrives depends on its era:

* **2026-07-28**: on the response stream of a ``subscriptions/listen`` request
  (basic/patterns/subscriptions.mdx). The client opts in with ``notifications:
  {toolsListChanged: true}``; the server acknowledges first
  (``notifications/subscriptions/acknowledged``), then tags every notification with
  ``_meta["io.modelcontextprotocol/subscriptionId"]`` = the request's id. A stream is not
  resumable: after any (re)subscription the client re-fetches, so the catalog is refreshed after
  every acknowledgment. A JSON-RPC response to the listen request is a graceful end.
* **2025-03-26 .. 2025-11-25**: on the GET stream of the session (transports.mdx §Listening for
  Messages from the Server; a 405 means the server offers none) or on the SSE reply of any
  request (handled by :mod:`gateway.backend.upstream.rpc`).

:class:`ChangeListener` listens only while the detected upstream advertised
``capabilities.tools.listChanged: true``. Each stream lives at most :data:`STREAM_LIFETIME_S` and
:data:`STREAM_MAX_BYTES` before it is re-opened; a failure is retried with backoff (1 s doubling
to 60 s); an upstream that refuses to listen (an error answer, 404/405, a declined filter) is not
asked again until its era is detected anew. Every notification only *requests* a refresh, which
the catalog refresher coalesces.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final, Literal

from gateway.backend.upstream.era import LinkState, modern_meta
from gateway.backend.upstream.link import UpstreamLink
from gateway.backend.upstream.rpc import UpstreamFault, decode_json, encode_json
from gateway.backend.upstream.sse_parser import SseError, SseParser
from gateway.background import Background
from gateway.observability.logging import get_logger
from gateway.outbound.failures import OutboundError, OutboundTimeout
from gateway.protocol.messages import LIST_CHANGED

__all__ = [
    "MAX_BACKOFF_S",
    "STREAM_LIFETIME_S",
    "STREAM_MAX_BYTES",
    "SUBSCRIPTION_ID",
    "ChangeListener",
]

STREAM_LIFETIME_S: Final = 300.0
"""A listen stream is closed and re-opened after this long (intermediaries drop idle streams)."""
STREAM_MAX_BYTES: Final = 1_048_576
"""Bytes read from one stream before it is re-opened (only small notifications are expected)."""
MAX_EVENT_BYTES: Final = 65_536
"""Largest single SSE event accepted on a listen stream."""
MAX_BACKOFF_S: Final = 60.0
IDLE_POLL_S: Final = 1.0
"""How often a listener without a usable upstream state looks again (no I/O)."""
SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"

_log = get_logger("gateway.backend.listen")

_End = Literal["closed", "unsupported"]


class ChangeListener:
    """Runs one background task per upstream; see the module docstring."""

    def __init__(self, link: UpstreamLink, *, on_change: Callable[[], None]) -> None:
        self._link = link
        self._on_change = on_change
        self._task = Background(f"backend-change-listener:{link.backend}")
        self._refused_generation: int | None = None
        self.acknowledged = 0
        """Subscriptions the upstream acknowledged (also counts re-opened streams)."""

    def start(self) -> None:
        self._task.start(self._run)

    async def close(self) -> None:
        await self._task.close()

    async def _run(self) -> None:
        failures = 0
        while True:
            state = self._link.state
            if (
                state is None
                or not state.tools_list_changed
                or state.generation == self._refused_generation
            ):
                await asyncio.sleep(IDLE_POLL_S)
                continue
            try:
                end = await self._listen(state)
            except (UpstreamFault, OutboundError, SseError, ValueError) as exc:
                failures += 1
                delay = min(2.0 ** (failures - 1), MAX_BACKOFF_S)
                _log.info(
                    "backend_listen_failed",
                    backend=self._link.backend,
                    era=state.era,
                    kind=getattr(exc, "kind", type(exc).__name__),
                    retry_s=delay,
                )
                await asyncio.sleep(delay)
                continue
            except Exception:  # a bug must not end listening for good; keep trying, loudly
                _log.exception("backend_listen_crashed", backend=self._link.backend)
                failures += 1
                await asyncio.sleep(min(2.0 ** (failures - 1), MAX_BACKOFF_S))
                continue
            if end == "unsupported":
                _log.info("backend_listen_unsupported", backend=self._link.backend, era=state.era)
                self._refused_generation = state.generation
            else:
                failures = 0

    async def _listen(self, state: LinkState) -> _End:
        """One stream, until it ends; raises on transport failures (retried with backoff)."""
        deadline = time.monotonic() + STREAM_LIFETIME_S
        request_id: int | None = None
        body: bytes | None = None
        if state.era == "modern":
            request_id = self._link.next_id()
            params = {"_meta": modern_meta(), "notifications": {"toolsListChanged": True}}
            body = encode_json(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "method": "subscriptions/listen",
                    "params": params,
                }
            )
        try:
            async with self._link.open_stream(
                state,
                body=body,
                method="subscriptions/listen",
                deadline=deadline,
                max_body=STREAM_MAX_BYTES,
            ) as response:
                if response.status in (404, 405) or (
                    response.status == 200 and response.content_type == "application/json"
                ):
                    return "unsupported"  # no GET stream / an error answer to listen
                if response.status != 200 or response.content_type != "text/event-stream":
                    raise UpstreamFault("http_status", response.status)
                return await self._read(response.chunks(), state, request_id)
        except OutboundTimeout:
            return "closed"  # the planned end of a stream's lifetime: open the next one

    async def _read(self, chunks: Any, state: LinkState, request_id: int | None) -> _End:
        parser = SseParser(max_line=MAX_EVENT_BYTES + 16, max_event=MAX_EVENT_BYTES)
        acknowledged = state.era == "legacy"  # a GET stream has no acknowledgment
        async for chunk in chunks:
            for event in parser.feed(chunk):
                if event.event != "message" or not event.data:
                    continue
                message = decode_json(event.data)
                if not isinstance(message, dict):
                    continue
                method = message.get("method")
                if request_id is not None:
                    if "method" not in message and message.get("id") == request_id:
                        # A response to listen: graceful end (result) or refusal (error).
                        return "closed" if "result" in message and acknowledged else "unsupported"
                    if not _tagged(message, request_id):
                        continue  # subscriptions.mdx: ours carry our subscription id
                if method == _ACKNOWLEDGED:
                    params = message.get("params")
                    granted = params.get("notifications") if isinstance(params, dict) else None
                    if not isinstance(granted, dict) or granted.get("toolsListChanged") is not True:
                        return "unsupported"  # the server declined toolsListChanged
                    acknowledged = True
                    self.acknowledged += 1
                    self._on_change()  # re-subscribed: re-fetch what may have been missed
                elif method == LIST_CHANGED["tools"] and acknowledged and "id" not in message:
                    self._on_change()
        return "closed"


def _tagged(message: dict[str, Any], request_id: int) -> bool:
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    value = meta.get(SUBSCRIPTION_ID) if isinstance(meta, dict) else None
    return type(value) is int and value == request_id
