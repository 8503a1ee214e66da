"""Real upstream MCP servers on loopback, for backend tests (aiohttp, port 0).

* :class:`ModernUpstream`: MCP 2026-07-28, JSON replies, ``server/discover``, paginated
  ``tools/list`` with ``ttlMs``, ``tools/call``.
* :class:`LegacyUpstream`: MCP 2025-06-18, ``initialize`` mints ``Mcp-Session-Id`` and requires it
  afterwards (404 for an unknown or expired session), SSE replies with progress notifications,
  DELETE ends the session.
* :class:`TokenServer`: an RFC 6749 §4.4 token endpoint plus RFC 8414 metadata, counting requests.

``aiohttp.test_utils.TestServer`` serves with ``handler_cancellation=True``, so a connection
the gateway closes cancels the handler (``disconnected`` is then set). Both MCP servers require
``Authorization: Bearer <one of accepted>``, record every request (headers and body bytes) and
have fault modes set through ``fault``: ``slow``, ``500``, ``oversized``, ``garbled_json``,
``lone_surrogate``, ``overflow`` (JSON only a lenient reader takes),
``garbled_sse``, ``wrong_id``, ``redirect``, ``401_once``, ``unknown_tool``, ``rpc_error``,
``bad_result``, ``list_fails``, ``cursor_loop``, ``wrong_id_sse``, ``missing_capability``
(modern: -32021 requiring ``elicitation`` unless the call declared it). With ``list_changed``
they advertise ``tools.listChanged`` and serve change streams (``announce()`` notifies them).
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

from aiohttp import web
from multidict import CIMultiDict

__all__ = [
    "LegacyUpstream",
    "ModernUpstream",
    "Recorded",
    "TokenServer",
    "echo_tool",
]


@dataclass
class Recorded:
    method: str
    path: str
    headers: CIMultiDict[str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def echo_tool(name: str, **schema_extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} tool",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}, "steps": {"type": "integer"}},
            **schema_extra,
        },
    }


@dataclass
class _Base:
    accepted: set[str] = field(default_factory=lambda: {"service-secret"})
    tools: list[dict[str, Any]] = field(default_factory=lambda: [echo_tool("echo")])
    fault: str | None = None
    slow_s: float = 30.0
    requests: list[Recorded] = field(default_factory=list)
    slow_started: asyncio.Event = field(default_factory=asyncio.Event)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when a slow handler sees the gateway close the connection."""
    refused_once: set[str] = field(default_factory=set)
    list_changed: bool = False
    """Advertise ``tools.listChanged``, serve a change stream (modern ``subscriptions/listen``,
    legacy GET) and put ``notifications/tools/list_changed`` into ``tools/call`` SSE replies."""
    subscribe: bool = False
    """Advertise ``resources.subscribe`` and serve listens, acknowledging no URI at all (a
    backend that declines every subscription)."""
    streams_opened: int = 0
    _streams: list[asyncio.Queue[dict[str, Any] | None]] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)
    """Canned results for other methods (``prompts/list``, ``resources/read``, ...): the
    ``prompts``/``resources``/``completions`` capabilities are advertised for what is here."""

    def surface_capabilities(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if any(m.startswith("prompts/") for m in self.answers):
            found["prompts"] = {}
        if any(m.startswith("resources/") for m in self.answers):
            found["resources"] = {"subscribe": True} if self.subscribe else {}
        if "completion/complete" in self.answers:
            found["completions"] = {}
        return found

    def announce(self) -> None:
        """Send ``notifications/tools/list_changed`` on every open change stream."""
        for queue in self._streams:
            queue.put_nowait({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})

    def end_streams(self) -> None:
        for queue in self._streams:
            queue.put_nowait(None)

    async def _change_stream(
        self, request: web.Request, first: dict[str, Any] | None, tag: Any = None
    ) -> web.StreamResponse:
        self.streams_opened += 1
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._streams.append(queue)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        try:
            if first is not None:
                queue.put_nowait(first)
            while (message := await queue.get()) is not None:
                if tag is not None:
                    params = dict(message.get("params") or {})
                    params["_meta"] = {"io.modelcontextprotocol/subscriptionId": tag}
                    message = {**message, "params": params}
                await response.write(b"data: " + json.dumps(message).encode() + b"\n\n")
        finally:
            self._streams.remove(queue)
        await response.write_eof()
        return response

    def calls(self, method: str) -> list[Recorded]:
        return [r for r in self.requests if r.json and r.json.get("method") == method]

    async def _record(self, request: web.Request) -> Recorded:
        body = await request.read()
        entry = Recorded(request.method, request.path, CIMultiDict(request.headers), body)
        self.requests.append(entry)
        return entry

    def _authorized(self, request: web.Request) -> str | None:
        value = request.headers.get("Authorization", "")
        if not value.startswith("Bearer "):
            return None
        token = value[7:]
        return token if token in self.accepted else None

    async def _slow(self, request: web.Request) -> None:
        # TestServer uses handler_cancellation=True: a closed connection cancels this handler.
        self.slow_started.set()
        try:
            await asyncio.sleep(self.slow_s)
        except asyncio.CancelledError:
            self.disconnected.set()
            raise

    def _call_result(self, params: dict[str, Any]) -> dict[str, Any]:
        args = params.get("arguments") or {}
        if self.fault == "bad_result":
            return {"content": "not a list"}
        return {
            "content": [{"type": "text", "text": json.dumps(args, sort_keys=True)}],
            "structuredContent": {"echo": args},
            "isError": args.get("text") == "fail",
            "_meta": {
                "io.modelcontextprotocol/serverInfo": {"name": "upstream", "version": "1"},
                "com.example/trace": "kept",
            },
        }

    async def _fault_reply(self, request: web.Request, rid: Any) -> web.StreamResponse | None:
        fault = self.fault
        if fault == "slow":
            await self._slow(request)
            return web.json_response({"jsonrpc": "2.0", "id": rid, "result": {"content": []}})
        if fault == "500":
            return web.Response(status=500, text="Traceback: secret internals at /srv/app.py")
        if fault == "oversized":
            big = "x" * 3_000_000
            return web.json_response(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {"content": [{"type": "text", "text": big}]},
                }
            )
        if fault == "garbled_json":
            return web.Response(body=b'{"jsonrpc":"2.0","id":', content_type="application/json")
        if fault in ("lone_surrogate", "overflow"):  # what only a lenient reader takes
            value = '"\\ud800"' if fault == "lone_surrogate" else "1e400"
            body = '{"jsonrpc":"2.0","id":' + json.dumps(rid) + ',"result":{"content":[],"x":'
            return web.Response(body=f"{body}{value}}}}}".encode(), content_type="application/json")
        if fault == "wrong_id":
            return web.json_response(
                {"jsonrpc": "2.0", "id": "not-yours", "result": {"content": []}}
            )
        if fault == "redirect":
            raise web.HTTPFound("http://127.0.0.1:9/elsewhere")
        if fault == "rpc_error":
            return web.json_response(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": -32603, "message": "db password is hunter2"},
                }
            )
        if fault == "unknown_tool":
            return web.json_response(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": -32602, "message": "Unknown tool: secret-internal-name"},
                },
                status=400,
            )
        return None


class ModernUpstream(_Base):
    """MCP 2026-07-28 server: stateless, JSON replies."""

    page_size: int = 2
    ttl_ms: int | None = 60_000

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/mcp", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        entry = await self._record(request)
        token = self._authorized(request)
        if token is None:
            return web.Response(status=401, headers={"WWW-Authenticate": "Bearer"})
        msg = entry.json
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if request.headers.get("MCP-Protocol-Version") != "2026-07-28":
            return web.json_response(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {
                        "code": -32022,
                        "message": "Unsupported protocol version",
                        "data": {"supported": ["2026-07-28"], "requested": "none"},
                    },
                },
                status=400,
            )
        if method == "subscriptions/listen" and self.fault == "listen_refused":
            return web.json_response(
                {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}},
                status=404,
            )
        if method == "subscriptions/listen" and (self.list_changed or self.subscribe):
            wanted = params.get("notifications") or {}
            ack = {
                "jsonrpc": "2.0",
                "method": "notifications/subscriptions/acknowledged",
                "params": {
                    "notifications": {"toolsListChanged": bool(wanted.get("toolsListChanged"))}
                },
            }
            return await self._change_stream(request, ack, tag=rid)
        if method == "server/discover":
            return self._ok(
                rid,
                {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {
                        "tools": {"listChanged": True} if self.list_changed else {},
                        **self.surface_capabilities(),
                    },
                    "ttlMs": 60000,
                    "cacheScope": "public",
                },
            )
        if method == "tools/list":
            if self.fault == "list_fails":
                return web.Response(status=503)
            start = int(params.get("cursor") or 0)
            page = self.tools[start : start + self.page_size]
            result: dict[str, Any] = {"tools": page, "cacheScope": "public"}
            if self.ttl_ms is not None:
                result["ttlMs"] = self.ttl_ms
            if start + self.page_size < len(self.tools):
                result["nextCursor"] = str(start + self.page_size)
            if self.fault == "cursor_loop":
                result["nextCursor"] = "0"
            return self._ok(rid, result)
        if method in self.answers:
            return self._ok(rid, self.answers[method])
        if method == "tools/call":
            if self.fault == "401_once" and not self.refused_once:
                self.refused_once.add(token)
                self.accepted.discard(token)
                return web.Response(status=401)
            reply = await self._fault_reply(request, rid)
            if reply is not None:
                return reply
            declared = (params.get("_meta") or {}).get("io.modelcontextprotocol/clientCapabilities")
            if self.fault == "missing_capability" and "elicitation" not in (declared or {}):
                return web.json_response(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "error": {
                            "code": -32021,
                            "message": "needs elicitation; internal host db-7",
                            "data": {
                                "requiredCapabilities": {
                                    "elicitation": {"form": {}},
                                    "com.example/secret": {"x": 1},
                                },
                                "debug": "internal",
                            },
                        },
                    },
                    status=400,
                )
            if params.get("name") not in {t.get("name") for t in self.tools}:
                return web.json_response(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "error": {"code": -32602, "message": "Unknown tool"},
                    },
                    status=400,
                )
            return self._ok(rid, self._call_result(params))
        return web.json_response(
            {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "nope"}},
            status=404,
        )

    @staticmethod
    def _ok(rid: Any, result: dict[str, Any]) -> web.Response:
        return web.json_response(
            {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", **result}}
        )


class LegacyUpstream(_Base):
    """MCP 2025-06-18 server with sessions and SSE replies."""

    sessions: set[str]
    deleted: list[str]
    strict_versions: tuple[str, ...] | None
    """When set, ``initialize`` with any other version is an error (no counter-offer)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sessions = set()
        self.deleted = []
        self.strict_versions = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/mcp", self.handle)
        app.router.add_delete("/mcp", self.handle_delete)
        app.router.add_get("/mcp", self.handle_get)
        return app

    async def handle_get(self, request: web.Request) -> web.StreamResponse:
        """2025-06-18 transports.mdx §Listening for Messages from the Server."""
        await self._record(request)
        if self._authorized(request) is None:
            return web.Response(status=401)
        if not self.list_changed:
            return web.Response(status=405, headers={"Allow": "POST, DELETE"})
        if request.headers.get("Mcp-Session-Id") not in self.sessions:
            return web.Response(status=404)
        return await self._change_stream(request, None)

    def expire_sessions(self) -> None:
        self.sessions.clear()

    async def handle_delete(self, request: web.Request) -> web.StreamResponse:
        await self._record(request)
        if self._authorized(request) is None:
            return web.Response(status=401)
        sid = request.headers.get("Mcp-Session-Id", "")
        self.deleted.append(sid)
        self.sessions.discard(sid)
        return web.Response(status=200)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        entry = await self._record(request)
        token = self._authorized(request)
        if token is None:
            return web.Response(status=401)
        msg = entry.json
        method, rid = msg.get("method"), msg.get("id")
        params = msg.get("params") or {}
        if method == "initialize":
            offered = params.get("protocolVersion")
            if self.strict_versions is not None and offered not in self.strict_versions:
                return web.json_response(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "error": {"code": -32602, "message": "Unsupported protocol version"},
                    }
                )
            version = offered if offered in ("2025-06-18", "2025-03-26") else "2025-06-18"
            sid = secrets.token_urlsafe(16)
            self.sessions.add(sid)
            return web.json_response(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {
                        "protocolVersion": version,
                        "capabilities": {
                            "tools": {"listChanged": True} if self.list_changed else {},
                            **self.surface_capabilities(),
                        },
                        "serverInfo": {"name": "legacy-upstream", "version": "1"},
                    },
                },
                headers={"Mcp-Session-Id": sid},
            )
        sid = request.headers.get("Mcp-Session-Id")
        if sid is None:
            return web.json_response(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": -32000, "message": "Bad Request: No valid session ID"},
                },
                status=400,
            )
        if sid not in self.sessions:
            return web.Response(status=404, text="session not found")
        if method == "notifications/initialized":
            return web.Response(status=202)
        if method in self.answers:
            return await self._sse(
                request, [{"jsonrpc": "2.0", "id": rid, "result": self.answers[method]}]
            )
        if method == "tools/list":
            if self.fault == "list_fails":
                return web.Response(status=500)
            return await self._sse(
                request, [{"jsonrpc": "2.0", "id": rid, "result": {"tools": self.tools}}]
            )
        if method == "tools/call":
            reply = await self._fault_reply(request, rid)
            if reply is not None:
                return reply
            if self.fault == "garbled_sse":
                return await self._sse_raw(request, b"data: {not json\n\n")
            if self.fault == "wrong_id_sse":
                other = {"jsonrpc": "2.0", "id": "other", "result": {"content": []}}
                return await self._sse(request, [other])
            events: list[dict[str, Any]] = [
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"level": "info", "data": "internal log line"},
                },
                {"jsonrpc": "2.0", "id": "srv-1", "method": "sampling/createMessage", "params": {}},
            ]
            if self.list_changed and (params.get("arguments") or {}).get("text") == "changed":
                events.append({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            token_value = (params.get("_meta") or {}).get("progressToken")
            if token_value is not None:
                steps = int((params.get("arguments") or {}).get("steps", 2))
                for i in range(1, steps + 1):
                    events.append(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token_value, "progress": i, "total": steps},
                        }
                    )
                events.append(
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/progress",
                        "params": {"progressToken": "someone-else", "progress": 99},
                    }
                )
            events.append({"jsonrpc": "2.0", "id": rid, "result": self._call_result(params)})
            return await self._sse(request, events)
        return web.json_response(
            {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "nope"}}
        )

    async def _sse(
        self, request: web.Request, messages: list[dict[str, Any]]
    ) -> web.StreamResponse:
        data = b": priming\n\nid: 1\ndata:\n\n"
        for message in messages:
            data += b"event: message\r\ndata: " + json.dumps(message).encode() + b"\r\n\r\n"
        return await self._sse_raw(request, data)

    async def _sse_raw(self, request: web.Request, data: bytes) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        # Dribble the stream in small pieces so the gateway's parser sees split lines.
        for start in range(0, len(data), 7):
            await response.write(data[start : start + 7])
        await response.write_eof()
        return response


def _basic_credentials(header: str) -> tuple[str, str] | None:
    """RFC 6749 §2.3.1: the id and secret of a Basic header, each form-urlencoded."""
    if not header.startswith("Basic "):
        return None
    try:
        raw = base64.b64decode(header[6:], validate=True).decode()
    except ValueError:
        return None
    user, _, password = raw.partition(":")
    return unquote_plus(user), unquote_plus(password)


@dataclass
class TokenServer:
    """Client-credentials token endpoint with RFC 8414 metadata."""

    client_id: str = "gateway"
    client_secret: str = "s3cret"
    expires_in: int = 3600
    issued: list[str] = field(default_factory=list)
    forms: list[dict[str, str]] = field(default_factory=list)
    auth_headers: list[str | None] = field(default_factory=list)
    grant_to: set[str] | None = None
    """The upstream's accepted-token set: issued tokens are added to it."""
    issuer: str = ""
    raw_token: tuple[bytes, str] | None = None
    """Answer a granted token request with these bytes and this ``Content-Type`` instead
    (``{token}`` in the bytes is replaced by the token it issues)."""
    raw_metadata: tuple[bytes, str] | None = None
    """Serve the metadata as these bytes and ``Content-Type`` (``{issuer}`` replaced)."""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/token", self.token)
        app.router.add_get("/.well-known/oauth-authorization-server", self.metadata)
        return app

    async def metadata(self, request: web.Request) -> web.Response:
        if self.raw_metadata is not None:
            body, content_type = self.raw_metadata
            raw = body.replace(b"{issuer}", self.issuer.encode())
            return web.Response(body=raw, headers={"Content-Type": content_type})
        return web.json_response({"issuer": self.issuer, "token_endpoint": self.issuer + "/token"})

    async def token(self, request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        self.forms.append(form)
        header = request.headers.get("Authorization")
        self.auth_headers.append(header)
        by_basic = header is not None and _basic_credentials(header) == (
            self.client_id,
            self.client_secret,
        )
        by_post = (
            form.get("client_id") == self.client_id
            and form.get("client_secret") == self.client_secret
        )
        # RFC 7523 §2.2: the test checks the assertion's signature and claims itself.
        by_jwt = form.get("client_assertion_type") == (
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
        ) and bool(form.get("client_assertion"))
        if not by_basic and not by_post and not by_jwt:
            return web.json_response({"error": "invalid_client"}, status=401)
        if form.get("grant_type") != "client_credentials":
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        value = f"cc-token-{len(self.issued) + 1}"
        self.issued.append(value)
        if self.grant_to is not None:
            self.grant_to.add(value)
        if self.raw_token is not None:
            body, content_type = self.raw_token
            raw = body.replace(b"{token}", value.encode())
            return web.Response(body=raw, headers={"Content-Type": content_type})
        return web.json_response(
            {"access_token": value, "token_type": "Bearer", "expires_in": self.expires_in}
        )
