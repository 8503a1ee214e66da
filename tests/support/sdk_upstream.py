"""The official ``mcp`` SDK's server (``MCPServer``) as a real upstream, on loopback.

``async with sdk_upstream() as sdk`` serves an ``MCPServer`` with one tool (``echo``) over
Streamable HTTP (uvicorn, 127.0.0.1, an ephemeral port) and records the JSON-RPC method (or the
HTTP method, for a GET) of every request it receives. ``sdk.bus`` is the server's subscription
bus: ``await sdk.announce()`` publishes ``notifications/tools/list_changed`` to every open
``subscriptions/listen`` stream. Like the SDK's default server it advertises ``ttlMs: 0`` and
``tools.listChanged: true``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged

__all__ = ["SdkUpstream", "sdk_upstream"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass
class SdkUpstream:
    url: str
    server: MCPServer
    bus: InMemorySubscriptionBus
    methods: list[str] = field(default_factory=list)

    def count(self, method: str) -> int:
        return self.methods.count(method)

    async def announce(self) -> None:
        await self.bus.publish(ToolsListChanged())


class _Recorder:
    """ASGI middleware: note each request's JSON-RPC method without touching the exchange."""

    def __init__(self, app: Any, methods: list[str]) -> None:
        self._app = app
        self._methods = methods

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if scope["method"] != "POST":
            self._methods.append(scope["method"])
        body: list[bytes] = []

        async def tee() -> MutableMapping[str, Any]:
            message = await receive()
            if message["type"] == "http.request" and scope["method"] == "POST":
                body.append(message.get("body", b""))
                if not message.get("more_body"):
                    with contextlib.suppress(ValueError, AttributeError):
                        self._methods.append(str(json.loads(b"".join(body)).get("method")))
            return message

        await self._app(scope, tee, send)


@contextlib.asynccontextmanager
async def sdk_upstream() -> AsyncIterator[SdkUpstream]:
    bus = InMemorySubscriptionBus()
    server = MCPServer("sdk-upstream", subscriptions=bus)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    methods: list[str] = []
    app = _Recorder(server.streamable_http_app(), methods)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(uv.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            while not uv.started:  # noqa: ASYNC110 - uvicorn offers no event
                await asyncio.sleep(0.02)
        yield SdkUpstream(f"http://127.0.0.1:{port}/mcp", server, bus, methods)
    finally:
        uv.should_exit = True
        await task
        sock.close()
