"""A service with people of its own (DEVELOPMENT ONLY): the upstream of a ``user_oauth`` backend.

``mcp-gateway demo`` and the tests put it behind the gateway as a backend whose credential is
``type: user_oauth``: like a GitHub-, Linear- or Notion-style MCP server it accepts, for a tool
call, only a token **its own** authorization server (a second
:class:`~gateway.dev.dev_issuer.DevIssuer`, with its own users) issued to a person for it
(``aud`` = this server's URL, RFC 8707), and tells who that person is. It:

- publishes its RFC 9728 protected-resource metadata at
  ``/.well-known/oauth-protected-resource/mcp``, naming that server, and answers 401 with a
  challenge pointing there;
- lets the gateway's catalog traffic (``server/discover``, ``tools/list``) through with its
  ``catalog_token`` (a token that acts for nobody); a tool call needs a person's token;
- serves ``whoami`` (who the server says you are) and ``notes_write`` (needs the
  ``notes:write`` scope: 403 ``insufficient_scope`` naming it otherwise), and the resource
  ``accounts://me`` (listed with the catalog token, read with a person's);
- records what it received (:attr:`AccountsBackend.received`, :attr:`calls`) and can refuse the
  next tokens it sees (:attr:`refuse`), for the tests.

A 2026-07-28 server only (the gateway detects the era with ``server/discover``).
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final

from aiohttp import web

from gateway.dev.demo_identity import NotVerified
from gateway.dev.demo_records import RecordedRequest, RecordsRequests, request_log
from gateway.dev.demo_vault import IssuerTokenCheck
from gateway.dev.loopback import bind_site, check_bind_host

__all__ = ["ACCOUNTS_TOOLS", "AccountsBackend", "Call"]

VERSION: Final = "2026-07-28"
SERVER_INFO: Final = {"name": "mcp-gateway-demo-accounts", "version": "1.0.0"}
WRITE_SCOPE: Final = "notes:write"
_EMPTY: Final = {"type": "object", "properties": {}, "additionalProperties": False}
ACCOUNTS_TOOLS: Final[tuple[dict[str, Any], ...]] = (
    {
        "name": "whoami",
        "title": "Who am I (at the accounts service)?",
        "description": "Shows who you are at the accounts service: the account you connected.",
        "inputSchema": _EMPTY,
        "annotations": {"readOnlyHint": True},
    },
    {
        "name": "notes_write",
        "title": "Write a note to your account",
        "description": "Writes a note as you (needs the notes:write scope).",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "maxLength": 200}},
            "required": ["text"],
            "additionalProperties": False,
        },
    },
)
MAX_BODY: Final = 65_536
ME: Final = {"uri": "accounts://me", "name": "me", "mimeType": "text/plain"}


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call the service served: who, with which token."""

    tool: str
    subject: str
    token: str
    scope: str


@dataclass
class AccountsBackend(RecordsRequests):
    """The service of the module docstring. Set :attr:`token_check` (its authorization server)
    and :attr:`catalog_token` before traffic; ``await start()``, read :attr:`url`."""

    host: str = "127.0.0.1"
    port: int = 0
    _: KW_ONLY
    path: str = "/mcp"
    allow_non_loopback: bool = False
    issuer_url: str = ""
    """Its authorization server (named in its protected-resource metadata)."""
    token_check: IssuerTokenCheck | None = None
    catalog_token: str = ""
    received: deque[RecordedRequest] = field(default_factory=request_log)
    calls: list[Call] = field(default_factory=list)
    refuse: int = 0
    """Answer 401 to the next this many tool calls, whatever their token (a token the
    service stopped accepting)."""
    _runner: web.AppRunner | None = field(default=None, repr=False)
    _url: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_bind_host(self.host, self.allow_non_loopback)

    @property
    def origin(self) -> str:
        if self._url is None:
            raise RuntimeError("AccountsBackend is not started")
        return self._url

    @property
    def url(self) -> str:
        return self.origin + self.path

    @property
    def metadata_url(self) -> str:
        return f"{self.origin}/.well-known/oauth-protected-resource{self.path}"

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", self.path, self._handle)
        app.router.add_get(f"/.well-known/oauth-protected-resource{self.path}", self._metadata)
        self._runner, self._url = await bind_site(app, self.host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metadata(self, request: web.Request) -> web.Response:
        """RFC 9728 §3.2: which server issues this service's tokens."""
        return web.json_response(
            {
                "resource": self.url,
                "authorization_servers": [self.issuer_url],
                "scopes_supported": ["notes:read", WRITE_SCOPE],
                "bearer_methods_supported": ["header"],
            }
        )

    def _unauthorized(self, reason: str) -> web.Response:
        challenge = (
            f'Bearer resource_metadata="{self.metadata_url}", error="invalid_token", '
            f'error_description="{reason}"'
        )
        return web.json_response(
            {"error": "invalid_token"}, status=401, headers={"WWW-Authenticate": challenge}
        )

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        if request.method != "POST":
            return web.Response(status=405, headers={"Allow": "POST"})
        try:
            message = json.loads(body)
        except ValueError:
            return _error(None, 400, -32700, "Parse error")
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return _error(None, 400, -32600, "Invalid Request")
        if "id" not in message:
            return web.Response(status=202)
        rid, method = message["id"], message["method"]
        raw_params = message.get("params")
        params: dict[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        supplied = request.headers.get("Authorization", "")
        token = supplied[7:] if supplied.startswith("Bearer ") else ""
        if request.headers.get("MCP-Protocol-Version") != VERSION:
            return _error(rid, 400, -32022, "Unsupported protocol version")
        meta = {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
        if method in ("server/discover", "tools/list"):
            if not token or token != self.catalog_token:
                return self._unauthorized("catalog token required")
            result: dict[str, Any] = (
                {
                    "supportedVersions": [VERSION],
                    "capabilities": {"tools": {"listChanged": False}, "resources": {}},
                    "instructions": "The demo accounts service: your own account, connected.",
                    "ttlMs": 3_600_000,
                    "cacheScope": "public",
                }
                if method == "server/discover"
                else {"tools": list(ACCOUNTS_TOOLS), "ttlMs": 60_000, "cacheScope": "public"}
            )
        elif method in ("resources/list", "resources/templates/list"):
            if not token or token != self.catalog_token:
                return self._unauthorized("catalog token required")
            key = "resources" if method == "resources/list" else "resourceTemplates"
            listed = [ME] if method == "resources/list" else []
            result = {key: listed, "ttlMs": 60_000, "cacheScope": "public"}
        elif method == "resources/read":
            return await self._read(rid, params, token, meta)
        elif method == "tools/call":
            return await self._call(rid, params, token, meta)
        else:
            return _error(rid, 404, -32601, "Method not found")
        reply = {"resultType": "complete", **result, "_meta": meta}
        return web.json_response({"jsonrpc": "2.0", "id": rid, "result": reply})

    async def _call(
        self, rid: Any, params: dict[str, Any], token: str, meta: dict[str, Any]
    ) -> web.Response:
        if self.refuse > 0:
            self.refuse -= 1
            return self._unauthorized("token no longer accepted")
        try:
            if self.token_check is None or not token or token == self.catalog_token:
                raise NotVerified("a person's token is required")
            claims = await self.token_check.verify(token)
        except NotVerified as exc:
            return self._unauthorized(str(exc))
        name = params.get("name")
        scopes = str(claims.get("scope") or "").split()
        subject = str(claims.get("sub"))
        if name == "notes_write" and WRITE_SCOPE not in scopes:
            challenge = (
                f'Bearer error="insufficient_scope", scope="{WRITE_SCOPE}", '
                f'resource_metadata="{self.metadata_url}"'
            )
            return web.json_response(
                {"error": "insufficient_scope"}, status=403, headers={"WWW-Authenticate": challenge}
            )
        if name not in ("whoami", "notes_write"):
            return _error(rid, 400, -32602, "Unknown tool")
        self.calls.append(Call(str(name), subject, token, " ".join(scopes)))
        if name == "whoami":
            text = f"You are {subject} at the accounts service (scopes: {' '.join(scopes)})."
            structured: dict[str, Any] = {"sub": subject, "scope": " ".join(scopes)}
        else:
            arguments = params.get("arguments") or {}
            text = f"Noted for {subject}: {arguments.get('text', '')}"
            structured = {"sub": subject, "written": True}
        result = {
            "resultType": "complete",
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "_meta": meta,
        }
        return web.json_response({"jsonrpc": "2.0", "id": rid, "result": result})

    async def _read(
        self, rid: Any, params: dict[str, Any], token: str, meta: dict[str, Any]
    ) -> web.Response:
        try:
            if self.token_check is None or not token or token == self.catalog_token:
                raise NotVerified("a person's token is required")
            claims = await self.token_check.verify(token)
        except NotVerified as exc:
            return self._unauthorized(str(exc))
        if params.get("uri") != ME["uri"]:
            return _error(rid, 400, -32602, "Resource not found")
        subject = str(claims.get("sub"))
        self.calls.append(Call("resources/read", subject, token, str(claims.get("scope") or "")))
        contents = [{"uri": ME["uri"], "mimeType": "text/plain", "text": f"You are {subject}."}]
        result = {
            "resultType": "complete",
            "contents": contents,
            "ttlMs": 0,
            "cacheScope": "private",
            "_meta": meta,
        }
        return web.json_response({"jsonrpc": "2.0", "id": rid, "result": result})


def _error(rid: Any, status: int, code: int, message: str) -> web.Response:
    body = {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
    return web.json_response(body, status=status)
