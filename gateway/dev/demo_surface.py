"""The demo backend's prompts, resources, resource template and completions (DEVELOPMENT ONLY).

What ``mcp-gateway demo`` shows beside its tools (docs/policy.md#prompts, #resources):

- prompt ``summarize_notes`` with a required ``topic`` and an optional ``style`` argument
  (Claude Code's ``/`` menu lists it as ``demo:summarize_notes (MCP)``);
- resources ``demo://notes/readme`` (markdown text), ``demo://images/logo.png`` (a PNG blob) and
  ``demo://notes/latest`` (the newest note: it changes with ``notes_add``, and a
  ``subscriptions/listen`` naming it is told ``notifications/resources/updated``,
  :mod:`gateway.dev.demo_listen`);
- template ``demo://notes/{page}`` whose ``page`` completes from :data:`PAGES`;
- prompt ``admin_report``, which the demo policy keeps for the ``admin`` scope (a step-up).

Same answers in both eras; the backend adds the era's members (``resultType``, ``_meta``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "LOGO_PNG",
    "PAGES",
    "PROMPTS",
    "RESOURCES",
    "TEMPLATES",
    "SurfaceError",
    "answer",
]

PAGES: Final = ("welcome", "roadmap", "faq")
LOGO_PNG: Final = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG."""
PROMPTS: Final = (
    {
        "name": "summarize_notes",
        "title": "Summarize notes",
        "description": "Ask the model to summarize the demo notes about a topic.",
        "arguments": [
            {"name": "topic", "description": "What the summary is about", "required": True},
            {"name": "style", "description": "bullets (default) or prose"},
        ],
    },
    {"name": "admin_report", "description": "A report for administrators (admin scope)."},
)
RESOURCES: Final = (
    {
        "uri": "demo://notes/readme",
        "name": "readme",
        "title": "About the demo notes",
        "mimeType": "text/markdown",
    },
    {
        "uri": "demo://images/logo.png",
        "name": "logo",
        "mimeType": "image/png",
        "size": len(LOGO_PNG),
    },
    {
        "uri": "demo://notes/latest",
        "name": "latest",
        "title": "The newest note (subscribe to it)",
        "mimeType": "text/plain",
    },
)
TEMPLATES: Final = (
    {"uriTemplate": "demo://notes/{page}", "name": "note page", "mimeType": "text/markdown"},
)
CAPABILITIES: Final = {
    "prompts": {"listChanged": False},
    "resources": {"subscribe": True},
    "completions": {},
}
_README: Final = "# Demo notes\n\nAdd notes with `notes_add`, list them with `notes_list`.\n"


class SurfaceError(Exception):
    """A JSON-RPC error to answer (code, fixed message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def answer(
    method: str, params: Mapping[str, Any], *, not_found: int, latest: str = "(no notes yet)"
) -> dict[str, Any]:
    """The result of one surface request (``not_found``: the era's resource-not-found code;
    ``latest``: the text of ``demo://notes/latest``)."""
    if method == "prompts/list":
        return {"prompts": [dict(p) for p in PROMPTS]}
    if method == "resources/list":
        return {"resources": [dict(r) for r in RESOURCES]}
    if method == "resources/templates/list":
        return {"resourceTemplates": [dict(t) for t in TEMPLATES]}
    if method == "prompts/get":
        return _prompt(params)
    if method == "resources/read":
        if params.get("uri") == "demo://notes/latest":
            return {
                "contents": [
                    {"uri": "demo://notes/latest", "mimeType": "text/plain", "text": latest}
                ]
            }
        return _read(params.get("uri"), not_found)
    return _complete(params)


def _prompt(params: Mapping[str, Any]) -> dict[str, Any]:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if name == "admin_report":
        text = "Report the number of notes and who added them."
    elif name == "summarize_notes" and isinstance(arguments.get("topic"), str):
        style = arguments.get("style", "bullets")
        text = f"Summarize the demo notes about {arguments['topic']} as {style}."
    else:
        raise SurfaceError(-32602, "Unknown prompt or missing argument")
    return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}


def _read(uri: Any, not_found: int) -> dict[str, Any]:
    if uri == "demo://notes/readme":
        return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": _README}]}
    if uri == "demo://images/logo.png":
        blob = base64.b64encode(LOGO_PNG).decode("ascii")
        return {"contents": [{"uri": uri, "mimeType": "image/png", "blob": blob}]}
    if isinstance(uri, str) and uri.startswith("demo://notes/"):
        page = uri.removeprefix("demo://notes/")
        if page in PAGES:
            text = f"# {page.title()}\n\nThe demo's {page} page.\n"
            return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": text}]}
    raise SurfaceError(not_found, "Resource not found")


def _complete(params: Mapping[str, Any]) -> dict[str, Any]:
    ref = params.get("ref") or {}
    argument = params.get("argument") or {}
    raw = argument.get("value")
    value: str = raw if isinstance(raw, str) else ""
    values: list[str] = []
    if ref.get("uri") == "demo://notes/{page}" and argument.get("name") == "page":
        values = [page for page in PAGES if page.startswith(value)]
    elif ref.get("name") == "summarize_notes" and argument.get("name") == "style":
        values = [style for style in ("bullets", "prose") if style.startswith(value)]
    return {"completion": {"values": values, "total": len(values), "hasMore": False}}
