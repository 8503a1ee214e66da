"""The official ``mcp`` SDK's server (``MCPServer``) as a real upstream, on loopback.

``async with sdk_upstream() as sdk`` serves an ``MCPServer`` with one tool (``echo``), and with
``surface=True`` also two prompts (``greet`` with a required and an optional argument,
``secret_plan`` without), three resources (text ``docs://guide/intro``, blob
``docs://guide/logo.png``, text ``docs://private/keys``), a template ``docs://guide/{page}``
and a completion handler (prompt argument ``name`` and template variable ``page``), over
Streamable HTTP (uvicorn, 127.0.0.1, an ephemeral port) and records the JSON-RPC method (or the
HTTP method, for a GET) of every request it receives. ``sdk.bus`` is the server's subscription
bus: ``await sdk.announce()`` publishes ``notifications/tools/list_changed`` to every open
``subscriptions/listen`` stream. Like the SDK's default server it advertises ``ttlMs: 0`` and
``tools.listChanged: true``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged

__all__ = ["LOGO", "PAGES", "SdkUpstream", "sdk_upstream"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


@dataclass
class SdkUpstream:
    url: str
    server: MCPServer
    bus: InMemorySubscriptionBus
    methods: list[str] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)
    """The ``Authorization`` header of every request (the gateway's credential only)."""

    def count(self, method: str) -> int:
        return self.methods.count(method)

    async def announce(self) -> None:
        await self.bus.publish(ToolsListChanged())


class _Recorder:
    """ASGI middleware: note each request's JSON-RPC method without touching the exchange."""

    def __init__(self, app: Any, methods: list[str], authorizations: list[str]) -> None:
        self._app = app
        self._methods = methods
        self._authorizations = authorizations

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        if scope["method"] != "POST":
            self._methods.append(scope["method"])
        for name, value in scope.get("headers", ()):
            if name.lower() == b"authorization":
                self._authorizations.append(value.decode("latin-1"))
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


LOGO: Final = bytes(range(256)) * 4
"""The blob resource's bytes (1024, every byte value)."""
PAGES: Final = ("intro", "install", "internals", "usage")


@contextlib.asynccontextmanager
async def sdk_upstream(
    *, surface: bool = False, rogue: bool = False, conformance: bool = False
) -> AsyncIterator[SdkUpstream]:
    """``rogue``: also list a resource, and return a link, already in the gateway's own
    ``mcp-gw://`` form (another backend's URI: a garbled answer the gateway must refuse).
    ``conformance``: instead, the fixtures the conformance suite's prompts, resources and
    completion scenarios read (``test://static-text``, ``test_simple_prompt``, ...), as their
    descriptions specify."""
    bus = InMemorySubscriptionBus()
    server = MCPServer("sdk-upstream", subscriptions=bus)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    if conformance:
        _add_conformance(server)
    elif surface:
        _add_surface(server, rogue=rogue)

    methods: list[str] = []
    authorizations: list[str] = []
    app = _Recorder(server.streamable_http_app(), methods, authorizations)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(uv.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            while not uv.started:  # noqa: ASYNC110 - uvicorn offers no event
                await asyncio.sleep(0.02)
        yield SdkUpstream(f"http://127.0.0.1:{port}/mcp", server, bus, methods, authorizations)
    finally:
        uv.should_exit = True
        await task
        sock.close()


def _add_surface(server: MCPServer, *, rogue: bool) -> None:
    from mcp.types import (
        Completion,
        EmbeddedResource,
        PromptReference,
        ResourceLink,
        ResourceTemplateReference,
        TextContent,
        TextResourceContents,
    )

    @server.tool()
    def link() -> list[Any]:
        """Return a link to the guide and the guide's introduction embedded."""
        target = "mcp-gw://other/docs://guide/intro" if rogue else "docs://guide/intro"
        return [
            TextContent(type="text", text="see the guide"),
            ResourceLink(type="resource_link", uri=target, name="intro"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="docs://guide/intro", text="# Introduction"),
            ),
        ]

    if rogue:

        @server.resource("mcp-gw://other/docs://x", mime_type="text/plain")
        def stolen() -> str:
            return "not mine"

    @server.prompt(description="Greet someone by name.")
    def greet(name: str, style: str = "plain") -> str:
        return f"Hello, {name}! ({style})"

    @server.prompt(description="Only for the planners.")
    def secret_plan() -> str:
        return "The plan is secret."

    @server.resource("docs://guide/intro", mime_type="text/markdown")
    def intro() -> str:
        return "# Introduction"

    @server.resource("docs://guide/logo.png", mime_type="image/png")
    def logo() -> bytes:
        return LOGO

    @server.resource("docs://private/keys", mime_type="text/plain")
    def keys() -> str:
        return "top secret keys"

    @server.resource("docs://guide/{page}", mime_type="text/markdown")
    def page(page: str) -> str:
        return f"# Page {page}"

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
        if isinstance(ref, ResourceTemplateReference) and argument.name == "page":
            return Completion(values=[p for p in PAGES if p.startswith(argument.value)])
        if isinstance(ref, PromptReference) and argument.name == "name":
            return Completion(values=[n for n in ("alice", "bob") if n.startswith(argument.value)])
        return None


def _add_conformance(server: MCPServer) -> None:
    """The fixtures of @modelcontextprotocol/conformance's server scenarios (their texts)."""
    from mcp.server.mcpserver.prompts.base import UserMessage
    from mcp.types import Completion, EmbeddedResource, ImageContent, TextResourceContents

    png = base64.b64encode(LOGO).decode()

    @server.resource("test://static-text", mime_type="text/plain")
    def static_text() -> str:
        return "This is the content of the static text resource."

    @server.resource("test://static-binary", mime_type="image/png")
    def static_binary() -> bytes:
        return LOGO

    @server.resource("test://template/{id}/data", mime_type="application/json")
    def template(id: str) -> str:
        return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})

    @server.prompt(description="A simple prompt without arguments.")
    def test_simple_prompt() -> str:
        """A simple prompt without arguments."""
        return "This is a simple prompt for testing."

    @server.prompt(description="A prompt with two required arguments.")
    def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        """A prompt with two required arguments."""
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    @server.prompt(description="A prompt embedding a resource.")
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[Any]:
        resource = TextResourceContents(
            uri=resourceUri, mimeType="text/plain", text="Embedded resource content for testing."
        )
        return [
            UserMessage(EmbeddedResource(type="resource", resource=resource)),
            UserMessage("Please process the embedded resource above."),
        ]

    @server.prompt(description="A prompt with an image.")
    def test_prompt_with_image() -> list[Any]:
        """A prompt with an image."""
        return [
            UserMessage(ImageContent(type="image", data=png, mimeType="image/png")),
            UserMessage("Please analyze the image above."),
        ]

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Completion:
        return Completion(values=[argument.value + "-completed"] if argument.value else [])
