"""A development server's stop is not held by an open stream (``bind_site``'s runner).

aiohttp's defaults let a handler whose client went away run on, and make the runner's cleanup
wait 60 s for a handler still running: a development upstream whose ``subscriptions/listen``
client (a gateway) had exited took a minute to stop. Real server and client on loopback.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from aiohttp import web

from gateway.dev.loopback import STOP_GRACE_S, bind_site


class Forever:
    """A stream that never ends on its own; records its handler's cancellation."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b": open\n\n")
        self.opened.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return response

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/stream", self.handle)
        return app


@pytest.mark.parametrize("client_left", [True, False], ids=["client_gone", "client_connected"])
async def test_a_stop_with_a_stream_open_returns_within_the_grace(client_left: bool) -> None:
    stream = Forever()
    runner, base = await bind_site(stream.app(), "127.0.0.1", 0)
    async with aiohttp.ClientSession() as http:
        response = await http.get(base + "/stream")
        await asyncio.wait_for(stream.opened.wait(), 5)
        if client_left:
            response.close()
            # The gone client's handler is cancelled then, not left running.
            await asyncio.wait_for(stream.cancelled.wait(), 5)
        started = time.monotonic()
        async with asyncio.timeout(STOP_GRACE_S * 2 + 3):  # aiohttp's default: 60 s
            await runner.cleanup()
        assert stream.cancelled.is_set()
        if client_left:
            assert time.monotonic() - started < STOP_GRACE_S
        response.close()
