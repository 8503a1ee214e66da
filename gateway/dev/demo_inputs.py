"""The demo backend's tools that ask the user (MCP 2026-07-28 basic/patterns/mrtr.mdx).

DEVELOPMENT ONLY. Three tools answer ``tools/call`` with ``input_required`` results, so
``mcp-gateway demo`` shows input rounds end to end through the gateway:

- ``notes_compose``: two rounds of elicitation: the note's text, then a confirmation; then the
  note is added (``notes:write`` in ``gateway/dev/demo-policy.yaml``);
- ``notes_summarize``: one sampling request: the client's model summarises the notes;
- ``workspace_roots``: one ``roots/list`` request: the client's roots, listed back.

Like a careful server, the backend never sends a request kind the client did not declare
(mrtr.mdx §Server Requirements 7; -32021 instead) and integrity-protects its own
``requestState`` with an HMAC under a per-process key, bound to the tool, the step, the
arguments and a 10-minute expiry (requirement 4). The gateway in front seals it again and binds
it to the user; the backend's own check is defence in depth for a server reachable without it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gateway.dev.demo_tools import MAX_NOTE_CHARS, DemoTools

__all__ = ["INPUT_TOOLS", "CapabilityMissing", "DemoInputs", "InvalidState"]

STATE_TTL_S: Final = 600
_NO_ARGS: Final = {"type": "object", "properties": {}, "additionalProperties": False}

INPUT_TOOLS: Final[tuple[dict[str, Any], ...]] = (
    {
        "name": "notes_compose",
        "title": "Compose a note",
        "description": "Ask the user what to write, confirm, then add the note (needs a client "
        "with 2026-07-28 elicitation).",
        "inputSchema": _NO_ARGS,
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
    },
    {
        "name": "notes_summarize",
        "title": "Summarize notes",
        "description": "Ask the client's model for a summary of the notebook (needs a client "
        "with 2026-07-28 sampling).",
        "inputSchema": _NO_ARGS,
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "workspace_roots",
        "title": "Workspace roots",
        "description": "Ask the client for its roots and list them (needs a client with "
        "2026-07-28 roots).",
        "inputSchema": _NO_ARGS,
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
)
_NAMES: Final = frozenset(tool["name"] for tool in INPUT_TOOLS)


class CapabilityMissing(Exception):
    """The client did not declare what the tool needs (-32021 with ``required``)."""

    def __init__(self, required: dict[str, Any]) -> None:
        super().__init__("missing client capability")
        self.required = required


class InvalidState(Exception):
    """A ``requestState`` this backend did not sign, or one that expired (-32602)."""


@dataclass
class DemoInputs:
    """Runs the input-asking tools against the shared notebook of :class:`DemoTools`."""

    tools: DemoTools
    _key: bytes = field(default_factory=lambda: os.urandom(32), repr=False)

    @staticmethod
    def handles(name: Any) -> bool:
        return name in _NAMES

    def call(self, params: Mapping[str, Any], capabilities: Mapping[str, Any]) -> dict[str, Any]:
        """One round: a ``CallToolResult`` body, or an ``InputRequiredResult`` (with
        ``resultType``). Raises :class:`CapabilityMissing` or :class:`InvalidState`."""
        name = str(params.get("name"))
        self.tools.calls[name] = self.tools.calls.get(name, 0) + 1
        if params.get("arguments") not in (None, {}):
            return _error("This tool takes no arguments.")
        raw_state = params.get("requestState")
        step, data = self._open(name, raw_state) if raw_state is not None else (0, "")
        answers = params.get("inputResponses")
        answers = answers if isinstance(answers, Mapping) else {}
        if name == "notes_compose":
            return self._compose(step, data, answers, capabilities)
        if name == "notes_summarize":
            return self._summarize(step, answers, capabilities)
        return self._roots(step, answers, capabilities)

    # --- tools -----------------------------------------------------------------------------

    def _compose(
        self, step: int, data: str, answers: Mapping[str, Any], caps: Mapping[str, Any]
    ) -> dict[str, Any]:
        _require_form(caps)
        if step == 1:
            text = _accepted(answers.get("note"), "text")
            if not isinstance(text, str) or not 0 < len(text) <= MAX_NOTE_CHARS:
                return _text("Nothing added.")
            confirm = _form(f'Add the note "{text}"?', {"confirm": {"type": "boolean"}})
            return self._ask("notes_compose", 2, text, {"confirm": confirm})
        if step == 2:
            if _accepted(answers.get("confirm"), "confirm") is not True:
                return _text("Nothing added.")
            return self.tools.call("notes_add", {"text": data})
        note = _form(
            "What should the note say?",
            {"text": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE_CHARS}},
        )
        return self._ask("notes_compose", 1, "", {"note": note})

    def _summarize(
        self, step: int, answers: Mapping[str, Any], caps: Mapping[str, Any]
    ) -> dict[str, Any]:
        notes = "\n".join(f"#{n.id}: {n.text}" for n in self.tools.notes)
        if not notes:
            return _text("(no notes yet)")
        if not isinstance(caps.get("sampling"), Mapping):
            raise CapabilityMissing({"sampling": {}})
        answer = answers.get("summary")
        if step == 1 and isinstance(answer, Mapping):
            content = answer.get("content")
            if isinstance(content, Mapping) and content.get("type") == "text":
                return _text(f"Summary: {content.get('text')}")
            return _error("The client's model did not answer with text.")
        request = {
            "method": "sampling/createMessage",
            "params": {
                "messages": [
                    {"role": "user", "content": {"type": "text", "text": f"Notes:\n{notes}"}}
                ],
                "systemPrompt": "Summarise these notes in one sentence.",
                "maxTokens": 200,
            },
        }
        return self._ask("notes_summarize", 1, "", {"summary": request})

    def _roots(
        self, step: int, answers: Mapping[str, Any], caps: Mapping[str, Any]
    ) -> dict[str, Any]:
        if not isinstance(caps.get("roots"), Mapping):
            raise CapabilityMissing({"roots": {}})
        answer = answers.get("roots")
        if step == 1 and isinstance(answer, Mapping) and isinstance(answer.get("roots"), list):
            roots = [r for r in answer["roots"] if isinstance(r, Mapping)]
            listed = "\n".join(str(r.get("uri")) for r in roots) or "(no roots)"
            return {**_text(listed), "structuredContent": {"roots": [dict(r) for r in roots]}}
        return self._ask("workspace_roots", 1, "", {"roots": {"method": "roots/list"}})

    # --- state -----------------------------------------------------------------------------

    def _ask(self, tool: str, step: int, data: str, requests: dict[str, Any]) -> dict[str, Any]:
        payload = json.dumps(
            {"tool": tool, "step": step, "data": data, "exp": int(time.time()) + STATE_TTL_S},
            separators=(",", ":"),
        ).encode()
        body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
        return {
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": f"{body}.{self._mac(body)}",
        }

    def _open(self, tool: str, state: Any) -> tuple[int, str]:
        if not isinstance(state, str) or state.count(".") != 1:
            raise InvalidState
        body, mac = state.split(".")
        if not hmac.compare_digest(mac, self._mac(body)):
            raise InvalidState
        # Signed by this process, so well-formed; the expiry and tool still have to match.
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        if claims["tool"] != tool or not time.time() < claims["exp"]:
            raise InvalidState
        return int(claims["step"]), str(claims["data"])

    def _mac(self, body: str) -> str:
        digest = hmac.new(self._key, body.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _require_form(caps: Mapping[str, Any]) -> None:
    elicitation = caps.get("elicitation")
    # client/elicitation.mdx: an empty elicitation object declares form mode.
    if not isinstance(elicitation, Mapping) or (elicitation and "form" not in elicitation):
        raise CapabilityMissing({"elicitation": {"form": {}}})


def _accepted(answer: Any, key: str) -> Any:
    if not isinstance(answer, Mapping) or answer.get("action") != "accept":
        return None
    content = answer.get("content")
    return content.get(key) if isinstance(content, Mapping) else None


def _form(message: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": properties,
                "required": sorted(properties),
            },
        },
    }


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}
