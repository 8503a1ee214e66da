"""Progress relay over an SSE response (MCP 2026-07-28 streamable-http.mdx §Sending Messages,
basic/patterns/progress.mdx).

A ``tools/call`` whose ``_meta.progressToken`` was set, from a client whose ``Accept`` admits
``text/event-stream``, gets a :class:`ProgressRelay` as ``ToolCall.on_progress``. The relay commits
to an SSE response only when the first progress notification arrives: every 4xx-producing check
has already run by then, and a call that sends no progress is answered with plain JSON (digest
§2.9). Once streaming, the final JSON-RPC response is the last event and the stream ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from gateway.http.sse import SSE_HEADERS, message_event
from gateway.jsonkit.write import compact

__all__ = ["ProgressRelay"]


class ProgressRelay:
    """Callable handed to the backend; switches the response to SSE on first use."""

    __slots__ = ("_closed", "_request", "bytes_out", "response")

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._closed = False
        self.response: web.StreamResponse | None = None
        self.bytes_out = 0

    @property
    def streaming(self) -> bool:
        return self.response is not None

    async def __call__(self, params: Mapping[str, Any]) -> None:
        if self._closed:
            return  # progress.mdx: notifications stop after the request completed
        message = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        await self._event(compact(message))

    async def finish(self, body: bytes) -> web.StreamResponse:
        """Send ``body`` (the final JSON-RPC response) as the last event and end the stream."""
        self._closed = True
        await self._event(body)
        response = self._require()
        await response.write_eof()
        return response

    async def _event(self, data: bytes) -> None:
        if self.response is None:
            response = web.StreamResponse(status=200, headers=SSE_HEADERS)
            await response.prepare(self._request)
            self.response = response
        chunk = message_event(data)
        self.bytes_out += len(chunk)
        await self.response.write(chunk)

    def _require(self) -> web.StreamResponse:
        if self.response is None:  # pragma: no cover - finish() always sends one event first
            raise RuntimeError("stream not started")
        return self.response
