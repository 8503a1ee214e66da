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

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final

from aiohttp import web

from gateway.dev.demo_identity import NotVerified
from gateway.dev.demo_records import RecordsRequests
from gateway.dev.demo_vault import IssuerTokenCheck
from gateway.dev.loopback import McpOnLoopback
from gateway.dev.simple_rpc import VERSION, RpcCall, read_call, rpc_error, rpc_result

__all__ = ["ACCOUNTS_TOOLS", "AccountsBackend", "Call"]

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
class AccountsBackend(RecordsRequests, McpOnLoopback):
    """The service of the module docstring. Set :attr:`token_check` (its authorization server)
    and :attr:`catalog_token` before traffic; ``await start()``, read :attr:`url`."""

    _: KW_ONLY
    issuer_url: str = ""
    """Its authorization server (named in its protected-resource metadata)."""
    token_check: IssuerTokenCheck | None = None
    catalog_token: str = ""
    calls: list[Call] = field(default_factory=list)
    refuse: int = 0
    """Answer 401 to the next this many tool calls, whatever their token (a token the
    service stopped accepting)."""
    max_body = MAX_BODY

    @property
    def metadata_url(self) -> str:
        return f"{self.base_url}/.well-known/oauth-protected-resource{self.path}"

    def _app(self) -> web.Application:
        app = super()._app()
        app.router.add_get(f"/.well-known/oauth-protected-resource{self.path}", self._metadata)
        return app

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
        call = read_call(body, request.headers)
        if not isinstance(call, RpcCall):
            return call
        rid, method = call.rid, call.method
        supplied = request.headers.get("Authorization", "")
        token = supplied[7:] if supplied.startswith("Bearer ") else ""
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
            return await self._read(rid, call.params, token)
        elif method == "tools/call":
            return await self._call(rid, call.params, token)
        else:
            return rpc_error(rid, 404, -32601, "Method not found")
        return rpc_result(rid, result, SERVER_INFO)

    async def _person(self, token: str) -> Mapping[str, Any]:
        """What the service's authorization server says of a person's token (raises
        :class:`~gateway.dev.demo_identity.NotVerified`: none, the catalog's, not vouched)."""
        if self.token_check is None or not token or token == self.catalog_token:
            raise NotVerified("a person's token is required")
        return await self.token_check.verify(token)

    async def _call(self, rid: Any, params: dict[str, Any], token: str) -> web.Response:
        if self.refuse > 0:
            self.refuse -= 1
            return self._unauthorized("token no longer accepted")
        try:
            claims = await self._person(token)
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
            return rpc_error(rid, 400, -32602, "Unknown tool")
        self.calls.append(Call(str(name), subject, token, " ".join(scopes)))
        if name == "whoami":
            text = f"You are {subject} at the accounts service (scopes: {' '.join(scopes)})."
            structured: dict[str, Any] = {"sub": subject, "scope": " ".join(scopes)}
        else:
            arguments = params.get("arguments") or {}
            text = f"Noted for {subject}: {arguments.get('text', '')}"
            structured = {"sub": subject, "written": True}
        result = {"content": [{"type": "text", "text": text}], "structuredContent": structured}
        return rpc_result(rid, result, SERVER_INFO)

    async def _read(self, rid: Any, params: dict[str, Any], token: str) -> web.Response:
        try:
            claims = await self._person(token)
        except NotVerified as exc:
            return self._unauthorized(str(exc))
        if params.get("uri") != ME["uri"]:
            return rpc_error(rid, 400, -32602, "Resource not found")
        subject = str(claims.get("sub"))
        self.calls.append(Call("resources/read", subject, token, str(claims.get("scope") or "")))
        contents = [{"uri": ME["uri"], "mimeType": "text/plain", "text": f"You are {subject}."}]
        result = {"contents": contents, "ttlMs": 0, "cacheScope": "private"}
        return rpc_result(rid, result, SERVER_INFO)
