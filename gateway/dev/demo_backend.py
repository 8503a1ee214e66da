"""MCP Streamable HTTP, both eras on one endpoint: the demo tool backend (DEVELOPMENT ONLY).

:class:`DemoBackend` is the private MCP server behind ``mcp-gateway demo`` and the tests. It:

- accepts only ``Authorization: Bearer <its service token>`` (401 otherwise): the gateway's own
  credential, never a user's token;
- serves the 2026-07-28 stateless era (``MCP-Protocol-Version: 2026-07-28``: ``server/discover``,
  required ``_meta`` keys, mirrored ``Mcp-Method``/``Mcp-Name`` headers, -32020/-32602/-32022/-32601
  with their HTTP statuses; streamable-http.mdx §Server Validation) and the legacy ``initialize``
  eras 2025-03-26/2025-06-18/2025-11-25 without sessions (JSON-RPC errors with HTTP 200);
- answers notifications with 202 and GET/DELETE with 405 ``Allow: POST``;
- records every request it receives (:attr:`received`), so tests can assert that a client's token
  never reaches it.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Final

from aiohttp import web

from gateway.dev import demo_surface
from gateway.dev.demo_identity import (
    ASSERTION_HEADER,
    WHOAMI_TOOL,
    CallerCheck,
    NotVerified,
    whoami_result,
)
from gateway.dev.demo_inputs import INPUT_TOOLS, CapabilityMissing, DemoInputs, InvalidState
from gateway.dev.demo_listen import LATEST_URI, DemoListeners
from gateway.dev.demo_records import RecordedRequest, RecordsRequests, request_log
from gateway.dev.demo_tasks import CAPABILITIES, TASK_TOOLS, TASKS, DemoTaskError, DemoTasks
from gateway.dev.demo_tools import TOOLS, DemoTools, UnknownToolError
from gateway.dev.loopback import McpOnLoopback
from gateway.seams import SURFACE_METHODS

__all__ = [
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "DemoBackend",
    "RecordedRequest",
    "RecordsRequests",
    "request_log",
]

MODERN_VERSIONS: Final = ("2026-07-28",)
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
SERVER_INFO: Final = {"name": "mcp-gateway-demo-backend", "version": "1.0.0"}
INSTRUCTIONS: Final = (
    "Demo notebook: echo, time_now, notes_list, notes_add, admin_reset; notes_compose, "
    "notes_summarize and workspace_roots ask the user (2026-07-28 clients); notes_report is "
    "slow (a task for clients that take tasks); whoami shows who this backend verified you are."
)
LISTED: Final = (*TOOLS, *INPUT_TOOLS, *TASK_TOOLS, WHOAMI_TOOL)
MAX_BODY: Final = 262_144
_META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
_META_CAPS: Final = "io.modelcontextprotocol/clientCapabilities"
_NAME_PARAM: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class _RpcError(Exception):
    def __init__(self, status: int, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.data = status, code, message, data


@dataclass
class DemoBackend(RecordsRequests, McpOnLoopback):
    """A both-eras MCP server on loopback. ``await start()``, read :attr:`url`, ``await stop()``."""

    _: KW_ONLY
    service_token: str = ""
    sse: bool = False
    """Answer requests as ``text/event-stream`` instead of JSON (both are legal; 2.3)."""
    tools: DemoTools = field(default_factory=DemoTools)
    inputs: DemoInputs = field(init=False, repr=False)
    tasks: DemoTasks = field(init=False, repr=False)
    """The slow tool's tasks (:mod:`gateway.dev.demo_tasks`)."""
    listeners: DemoListeners = field(default_factory=DemoListeners, repr=False)
    """Open ``subscriptions/listen`` streams (:mod:`gateway.dev.demo_listen`)."""
    auth_failures: int = 0
    caller_check: CallerCheck | None = None
    """Set (``mcp-gateway demo``): every ``tools/call`` must carry a valid caller assertion of
    the gateway (else 401), and ``whoami`` shows the verified caller."""
    _caller: dict[str, Any] | None = field(default=None, repr=False)
    max_body = MAX_BODY

    def __post_init__(self) -> None:
        if not self.service_token:
            raise ValueError("DemoBackend needs a service_token")
        super().__post_init__()
        self.inputs = DemoInputs(self.tools)
        self.tasks = DemoTasks(self.tools)

    async def stop(self) -> None:
        self.listeners.close()
        await super().stop()

    # --- HTTP ------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await self._record(request)
        if request.method != "POST":
            # 2026-07-28 streamable-http.mdx: no GET stream, no sessions; 405 for both eras.
            return web.Response(status=405, headers={"Allow": "POST"})
        expected = f"Bearer {self.service_token}".encode()
        supplied = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(supplied, expected):
            self.auth_failures += 1
            # RFC 6750 §3.1: no error code when no credentials were sent.
            challenge = 'Bearer realm="demo-backend"' + (
                ', error="invalid_token"' if supplied else ""
            )
            return web.json_response(
                {"error": "invalid_token" if supplied else "unauthorized"},
                status=401,
                headers={"WWW-Authenticate": challenge},
            )
        try:
            message = json.loads(body)
        except ValueError:
            return self._error(None, _RpcError(400, -32700, "Parse error"))
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return self._error(None, _RpcError(400, -32600, "Invalid Request"))
        if "method" not in message and ("result" in message or "error" in message):
            return web.Response(status=202)  # a posted response (legacy): accepted
        method = message.get("method")
        request_id = message.get("id")
        if not isinstance(method, str) or ("id" in message and not _valid_id(request_id)):
            return self._error(None, _RpcError(400, -32600, "Invalid Request"))
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            return self._error(request_id, _RpcError(400, -32602, "params must be an object"))
        version = request.headers.get("MCP-Protocol-Version")
        meta = (params or {}).get("_meta")
        modern = version in MODERN_VERSIONS or (
            version is not None and version not in LEGACY_VERSIONS
        )
        if version is None and isinstance(meta, dict) and _META_VERSION in meta:
            # A modern body without the header it requires (streamable-http.mdx §Server Validation).
            return self._error(request_id, _RpcError(400, -32020, "Missing MCP-Protocol-Version"))
        if method == "tools/call" and self.caller_check is not None:
            try:  # docs/backends.md#verifying-the-assertion, the backend owner's side
                self._caller = await self.caller_check.verify(request.headers.get(ASSERTION_HEADER))
            except NotVerified as exc:
                self.auth_failures += 1
                return web.json_response(
                    {"error": "invalid_assertion", "error_description": str(exc)}, status=401
                )
        if modern and method == "subscriptions/listen" and "id" in message:
            try:  # the same _meta and header checks as every request; then -32601 (no result)
                self._modern(request, method, params or {}, version or "")
            except _RpcError as error:
                if error.code != -32601:
                    return self._error(request_id, error)
            return await self.listeners.serve(request, request_id, params or {})
        try:
            if "id" not in message:
                return web.Response(status=202)  # notifications: accepted, no body
            if modern:
                result = self._modern(request, method, params or {}, version or "")
            else:
                result = self._legacy(method, params or {})
        except _RpcError as error:
            if not modern and error.status < 500:
                error.status = 200  # legacy path: JSON-RPC errors go out with 200
            return self._error(request_id, error)
        return self._reply({"jsonrpc": "2.0", "id": request_id, "result": result})

    # --- eras ------------------------------------------------------------------------------

    def _modern(
        self, request: web.Request, method: str, params: dict[str, Any], header_version: str
    ) -> dict[str, Any]:
        meta = params.get("_meta")
        if not isinstance(meta, dict) or _META_VERSION not in meta or _META_CAPS not in meta:
            raise _RpcError(
                400, -32602, "params._meta needs protocolVersion and clientCapabilities"
            )
        if meta[_META_VERSION] != header_version:
            raise _RpcError(400, -32020, "Header mismatch: MCP-Protocol-Version")
        if request.headers.get("Mcp-Method", "").strip() != method:
            raise _RpcError(400, -32020, "Header mismatch: Mcp-Method")
        if self.tasks.handles(method, params):  # checks its own Mcp-Name (taskId)
            extensions = (meta.get(_META_CAPS) or {}).get("extensions") or {}
            try:
                result = self.tasks.answer(
                    method,
                    params,
                    TASKS in extensions,
                    _decode_header(request.headers.get("Mcp-Name")),
                )
            except DemoTaskError as error:
                raise _RpcError(400, error.code, error.message, error.data) from None
            return {**result, "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
        if method in _NAME_PARAM:
            sent = _decode_header(request.headers.get("Mcp-Name"))
            if sent is None or sent != params.get(_NAME_PARAM[method]):
                raise _RpcError(400, -32020, "Header mismatch: Mcp-Name")
        if not isinstance(meta[_META_VERSION], str):
            raise _RpcError(400, -32602, "protocolVersion must be a string")
        if meta[_META_VERSION] not in MODERN_VERSIONS:
            raise _RpcError(
                400,
                -32022,
                "Unsupported protocol version",
                {"supported": list(MODERN_VERSIONS), "requested": meta[_META_VERSION]},
            )
        server_meta = {"io.modelcontextprotocol/serverInfo": SERVER_INFO}
        if method == "server/discover":
            return {
                "resultType": "complete",
                "supportedVersions": list(MODERN_VERSIONS),
                "capabilities": {
                    "tools": {"listChanged": False},
                    **demo_surface.CAPABILITIES,
                    **CAPABILITIES,
                },
                "instructions": INSTRUCTIONS,
                "ttlMs": 3_600_000,
                "cacheScope": "public",
                "_meta": server_meta,
            }
        if method == "tools/list":
            return {
                "resultType": "complete",
                "tools": list(LISTED),
                "ttlMs": 60_000,
                "cacheScope": "public",
                "_meta": server_meta,
            }
        if method == "tools/call" and self.inputs.handles(params.get("name")):
            caps = meta.get(_META_CAPS)
            try:
                result = self.inputs.call(params, caps if isinstance(caps, dict) else {})
            except CapabilityMissing as missing:
                raise _RpcError(
                    400,
                    -32021,
                    "Missing required client capability",
                    {"requiredCapabilities": missing.required},
                ) from None
            except InvalidState:
                raise _RpcError(400, -32602, "Invalid requestState") from None
            return {"resultType": "complete", **result, "_meta": server_meta}
        if method == "tools/call":
            return {"resultType": "complete", **self._call(params, 400), "_meta": server_meta}
        if method in SURFACE_METHODS:
            return {
                "resultType": "complete",
                **self._surface(method, params, 400, -32602),
                "_meta": server_meta,
            }
        raise _RpcError(404, -32601, "Method not found")

    def _legacy(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            requested = params.get("protocolVersion")
            # Lifecycle §Version Negotiation: echo a supported version, else counter-offer.
            version = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
            return {
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": False}, **demo_surface.CAPABILITIES},
                "serverInfo": SERVER_INFO,
                "instructions": INSTRUCTIONS,
            }
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": list(LISTED)}
        if method == "tools/call" and self.tasks.handles(method, params):
            return {k: v for k, v in self.tasks.report(params).items() if k != "resultType"}
        if method == "tools/call" and self.inputs.handles(params.get("name")):
            # Server-to-client requests on a legacy stream are not implemented here.
            text = "This tool asks the user for input; call it over MCP 2026-07-28."
            return {"content": [{"type": "text", "text": text}], "isError": True}
        if method == "tools/call":
            return self._call(params, 200)
        if method in SURFACE_METHODS:
            return self._surface(method, params, 200, -32002)
        raise _RpcError(200, -32601, "Method not found")

    def _surface(
        self, method: str, params: dict[str, Any], status: int, not_found: int
    ) -> dict[str, Any]:
        notes = self.tools.notes
        latest = f"#{notes[-1].id}: {notes[-1].text}" if notes else "(no notes yet)"
        try:
            return demo_surface.answer(method, params, not_found=not_found, latest=latest)
        except demo_surface.SurfaceError as error:
            raise _RpcError(status, error.code, error.message) from None

    def _call(self, params: dict[str, Any], status: int) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise _RpcError(status, -32602, "tools/call needs params.name")
        if name == WHOAMI_TOOL["name"]:
            caller, self._caller = self._caller, None  # set by _handle for this very call
            if caller is None:
                text = "This backend was started without caller assertions."
                return {"content": [{"type": "text", "text": text}], "isError": True}
            return whoami_result(caller)
        try:
            result = self.tools.call(name, params.get("arguments"))
        except UnknownToolError:
            raise _RpcError(status, -32602, "Unknown tool") from None
        if name in ("notes_add", "admin_reset") and not result.get("isError"):
            self.listeners.changed(LATEST_URI)  # the newest note changed
        return result

    # --- rendering -------------------------------------------------------------------------

    def _error(self, request_id: Any, error: _RpcError) -> web.Response:
        body: dict[str, Any] = {"code": error.code, "message": error.message}
        if error.data is not None:
            body["data"] = error.data
        return web.json_response(
            {"jsonrpc": "2.0", "id": request_id, "error": body}, status=error.status
        )

    def _reply(self, message: dict[str, Any]) -> web.Response:
        if self.sse:
            text = f"event: message\ndata: {json.dumps(message)}\n\n"
            return web.Response(text=text, content_type="text/event-stream")
        return web.json_response(message)


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _decode_header(value: str | None) -> str | None:
    """streamable-http.mdx §Value encoding: plain (OWS-trimmed) or ``=?base64?…?=``."""
    if value is None:
        return None
    value = value.strip()
    if value.startswith("=?base64?") and value.endswith("?="):
        try:
            return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
    return value
