"""The bare backend of the benchmarks: an aiohttp MCP server (2026-07-28, no auth, no logging).

It answers server/discover, tools/list and tools/call echo, prompts/list and prompts/get greet,
resources/list and resources/read bench://notes/1, tasks/get (any id: a working task). /mcp
lists 1 tool, /mcp<N> lists N. ``scripts/bench.py`` runs it as its own process
(``python scripts/bench_backend.py PORT``); ``scripts/micro/pipeline.py`` serves :func:`app` in
its own loop.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from aiohttp import web

__all__ = ["app"]

PROMPT = {
    "name": "greet",
    "description": "Greet someone.",
    "arguments": [{"name": "name", "required": True}],
}
NOTE = {"uri": "bench://notes/1", "name": "note-1", "mimeType": "text/plain"}
LISTS = {
    "prompts/list": ("prompts", [PROMPT]),
    "resources/list": ("resources", [NOTE]),
    "resources/templates/list": ("resourceTemplates", []),
}
_CATALOGS: dict[str, list[dict[str, Any]]] = {}


def tools(n: int) -> list[dict[str, Any]]:
    echo = {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    }
    more = [
        {
            "name": f"tool_{i:04d}",
            "description": f"Tool {i}.",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        }
        for i in range(1, n)
    ]
    return [echo, *more]


def result_of(method: Any, params: Any, listed: str) -> dict[str, Any] | None:
    """The result of ``method``, or None for a method this backend does not have."""
    if method == "tools/call":
        text = params["arguments"].get("text", "")
        return {"resultType": "complete", "content": [{"type": "text", "text": text}]}
    if method == "prompts/get":
        name = params.get("arguments", {}).get("name", "")
        return {
            "resultType": "complete",
            "messages": [{"role": "user", "content": {"type": "text", "text": f"Hello {name}"}}],
        }
    if method == "tasks/get":
        return {
            "resultType": "complete",
            "taskId": params["taskId"],
            "status": "working",
            "createdAt": "2026-12-01T00:00:00Z",
            "lastUpdatedAt": "2026-12-01T00:00:00Z",
            "ttlMs": 86400000,
        }
    if method == "resources/read":
        contents = [{"uri": NOTE["uri"], "mimeType": "text/plain", "text": "note one"}]
        return {"resultType": "complete", "contents": contents}
    if method == "server/discover":
        return {
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {
                "tools": {},
                "prompts": {},
                "resources": {},
                "extensions": {"io.modelcontextprotocol/tasks": {}},
            },
            "ttlMs": 600000,
            "cacheScope": "public",
            "serverInfo": {"name": "bare", "version": "1"},
        }
    if method in LISTS:
        key, items = LISTS[method]
        return {"resultType": "complete", key: items, "ttlMs": 600000, "cacheScope": "public"}
    if method == "tools/list":
        if listed not in _CATALOGS:
            _CATALOGS[listed] = tools(int(listed))
        return {
            "resultType": "complete",
            "tools": _CATALOGS[listed],
            "ttlMs": 600000,
            "cacheScope": "public",
        }
    return None


async def handle(request: web.Request) -> web.Response:
    message = json.loads(await request.read())
    result = result_of(
        message.get("method"), message.get("params"), request.match_info.get("n") or "1"
    )
    if result is None:
        error = {"code": -32601, "message": "Method not found"}
        return web.json_response(
            {"jsonrpc": "2.0", "id": message.get("id"), "error": error}, status=404
        )
    return web.json_response({"jsonrpc": "2.0", "id": message.get("id"), "result": result})


def app() -> web.Application:
    application = web.Application()
    application.router.add_post("/mcp", handle)
    application.router.add_post("/mcp{n:[0-9]+}", handle)
    return application


if __name__ == "__main__":
    web.run_app(app(), host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
