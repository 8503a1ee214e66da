"""MCP ``tools/list`` / ``tools/call`` (2026-07-28 server/tools.mdx): the demo backend's tools.

DEVELOPMENT ONLY. Five tools of different sensitivity for ``mcp-gateway demo`` and the tests:
``echo`` and ``time_now`` (harmless), ``notes_list`` (read), ``notes_add`` (write) and
``admin_reset`` (admin). Input schemas close ``additionalProperties``; arguments are checked here
and bad input becomes a tool result with ``isError: true`` (2025-11-25 clarified that input
validation errors belong there, so the model can correct itself).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

__all__ = ["MAX_NOTES", "MAX_NOTE_CHARS", "TOOLS", "DemoTools", "UnknownToolError"]

MAX_NOTE_CHARS: Final = 2000
"""Longer note or echo texts are refused with an ``isError`` result."""
MAX_NOTES: Final = 1000
"""The in-memory notebook refuses notes past this many."""

_TEXT_SCHEMA: Final = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE_CHARS}},
    "required": ["text"],
    "additionalProperties": False,
}
_NO_ARGS: Final = {"type": "object", "properties": {}, "additionalProperties": False}

TOOLS: Final[tuple[dict[str, Any], ...]] = (
    {
        "name": "echo",
        "title": "Echo",
        "description": "Return the given text unchanged.",
        "inputSchema": _TEXT_SCHEMA,
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "time_now",
        "title": "Current time",
        "description": "The server's current time in UTC (ISO 8601).",
        "inputSchema": _NO_ARGS,
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "notes_list",
        "title": "List notes",
        "description": "List the notes in the shared demo notebook.",
        "inputSchema": _NO_ARGS,
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "notes_add",
        "title": "Add a note",
        "description": "Append a note to the shared demo notebook.",
        "inputSchema": _TEXT_SCHEMA,
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
    },
    {
        "name": "admin_reset",
        "title": "Reset notebook",
        "description": "Delete every note (administrators only).",
        "inputSchema": _NO_ARGS,
        "annotations": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
    },
)


class UnknownToolError(LookupError):
    """The named tool does not exist (JSON-RPC -32602 "Unknown tool")."""


@dataclass(frozen=True, slots=True)
class Note:
    id: int
    text: str
    created_at: str


@dataclass
class DemoTools:
    """The tools' state: one in-memory notebook shared by every caller."""

    notes: list[Note] = field(default_factory=list)
    calls: dict[str, int] = field(default_factory=dict)
    _next_id: int = 1

    def call(self, name: str, arguments: Any) -> dict[str, Any]:
        """Run one tool; return a ``CallToolResult`` body (without ``resultType``)."""
        tool = next((t for t in TOOLS if t["name"] == name), None)
        if tool is None:
            raise UnknownToolError(name)
        self.calls[name] = self.calls.get(name, 0) + 1
        args = {} if arguments is None else arguments
        problem = _check_arguments(tool["inputSchema"], args)
        if problem:
            return _error(problem)
        if name == "echo":
            return _text(args["text"])
        if name == "time_now":
            now = datetime.now(UTC).isoformat(timespec="seconds")
            return {**_text(now), "structuredContent": {"now": now}}
        if name == "notes_list":
            notes = [{"id": n.id, "text": n.text, "created_at": n.created_at} for n in self.notes]
            summary = "\n".join(f"#{n['id']}: {n['text']}" for n in notes) or "(no notes yet)"
            return {**_text(summary), "structuredContent": {"notes": notes}}
        if name == "notes_add":
            if len(self.notes) >= MAX_NOTES:
                return _error("The notebook is full; ask an administrator to reset it.")
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            note = Note(self._next_id, args["text"], stamp)
            self._next_id += 1
            self.notes.append(note)
            return {**_text(f"Added note #{note.id}."), "structuredContent": {"id": note.id}}
        # admin_reset
        count = len(self.notes)
        self.notes.clear()
        return {**_text(f"Deleted {count} notes."), "structuredContent": {"deleted": count}}


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _check_arguments(schema: dict[str, Any], args: Any) -> str | None:
    """The subset of JSON Schema these tools use: object, required, string lengths, no extras."""
    if not isinstance(args, dict):
        return "Arguments must be an object."
    properties: dict[str, Any] = schema.get("properties", {})
    extra = sorted(set(args) - set(properties))
    if extra:
        return "Unexpected argument(s); see the tool's inputSchema."
    for name in schema.get("required", []):
        if name not in args:
            return f"Missing required argument '{name}'."
    for name, value in args.items():
        spec = properties[name]
        if spec.get("type") == "string":
            if not isinstance(value, str):
                return f"Argument '{name}' must be a string."
            if not spec.get("minLength", 0) <= len(value) <= spec.get("maxLength", 1 << 30):
                return f"Argument '{name}' has a bad length."
    return None
