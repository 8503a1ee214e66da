"""The demo backend's ``subscriptions/listen`` streams (DEVELOPMENT ONLY; 2026-07-28
basic/patterns/subscriptions.mdx).

The demo backend advertises ``resources.subscribe``; a listen that names
``demo://notes/latest`` (the newest note, which changes with every ``notes_add`` and
``admin_reset``) is acknowledged for it and then told ``notifications/resources/updated`` at
each change. Other filter members are not offered (acknowledged without them). A stream lasts
until the client (the gateway) closes it; :meth:`DemoListeners.close` ends every stream with the
graceful listen result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Final

from aiohttp import web

__all__ = ["LATEST_URI", "DemoListeners"]

LATEST_URI: Final = "demo://notes/latest"
_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
_SUBSCRIBABLE: Final = frozenset({LATEST_URI})


class DemoListeners:
    """Open listen streams; :meth:`changed` tells the ones subscribed to a URI."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[str | None]] = set()

    def __len__(self) -> int:
        return len(self._queues)

    def changed(self, uri: str) -> None:
        for queue in self._queues:
            queue.put_nowait(uri)

    def close(self) -> None:
        for queue in self._queues:
            queue.put_nowait(None)

    async def serve(
        self, request: web.Request, request_id: Any, params: dict[str, Any]
    ) -> web.StreamResponse:
        wanted = params.get("notifications")
        raw = wanted.get("resourceSubscriptions") if isinstance(wanted, dict) else None
        uris = [u for u in (raw if isinstance(raw, list) else []) if u in _SUBSCRIBABLE]
        meta = {_SUBSCRIPTION_ID: request_id}
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=256)
        self._queues.add(queue)
        try:
            honoured: dict[str, Any] = {"resourceSubscriptions": uris} if uris else {}
            ack = {"_meta": meta, "notifications": honoured}
            await _send(
                response,
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/subscriptions/acknowledged",
                    "params": ack,
                },
            )
            while (uri := await queue.get()) is not None:
                if uri in uris:
                    await _send(
                        response,
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/resources/updated",
                            "params": {"_meta": meta, "uri": uri},
                        },
                    )
            end = {"resultType": "complete", "_meta": meta}
            await _send(response, {"jsonrpc": "2.0", "id": request_id, "result": end})
            with contextlib.suppress(ConnectionError):
                await response.write_eof()
        except ConnectionError:
            pass  # the client went away
        finally:
            self._queues.discard(queue)
        return response


async def _send(response: web.StreamResponse, message: dict[str, Any]) -> None:
    await response.write(b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n")
