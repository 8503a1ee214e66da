"""A real 2026-07-28 upstream whose tools ask the user for input (basic/patterns/mrtr.mdx).

:class:`InputUpstream` is a :class:`~tests.support.upstreams.ModernUpstream` (same recording,
service-credential check and faults) whose tools answer with ``input_required`` results:

- ``confirm_delete {path}``: one elicitation (form, a boolean ``confirm``), then
  ``Deleted <path>`` or ``Kept <path>``;
- ``summarize {text}``: one sampling request, then ``Summary: <the client's completion>``;
- ``workspace {}``: one ``roots/list`` request, then the root URIs;
- ``book_trip {city}``: two rounds: an elicitation for the dates (state ``r1``), then one for
  the confirmation (state ``r2:<dates>``), then ``Booked <city> on <dates>``;
- ``refresh {}``: a state-only round (no ``inputRequests``), complete on the retry;
- ``everything {}``: elicitation, sampling and roots in one round;
- ``raw {}``: answers :attr:`raw_round` as is (for shapes the gateway must refuse);
- ``endless {}``: asks again on every call.

Like a careless server it does not look at the declared client capabilities: the gateway's own
check must stop what the client cannot handle. Its own ``requestState`` is deliberately plain
text (``up:<tool>:<step>``), so tests can see it came back untouched and never reached the client.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tests.support.upstreams import ModernUpstream, Recorded, echo_tool

__all__ = ["INPUT_TOOLS", "InputUpstream", "form", "retries"]


def _tool(name: str, **properties: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} (asks the user)",
        "inputSchema": {"type": "object", "properties": properties},
    }


INPUT_TOOLS = (
    _tool("confirm_delete", path={"type": "string"}),
    _tool("summarize", text={"type": "string"}),
    _tool("workspace"),
    _tool("book_trip", city={"type": "string"}),
    _tool("refresh"),
    _tool("everything"),
    _tool("raw"),
    _tool("endless"),
)


def form(message: str, **properties: Any) -> dict[str, Any]:
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


SAMPLING = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise the text"}}],
        "systemPrompt": "You summarise.",
        "maxTokens": 100,
    },
}
ROOTS = {"method": "roots/list"}


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def asking(requests: dict[str, Any] | None, state: str | None) -> dict[str, Any]:
    """An ``input_required`` result (SEP-2322) with these ``inputRequests`` and ``requestState``."""
    result: dict[str, Any] = {"resultType": "input_required"}
    if requests is not None:
        result["inputRequests"] = requests
    if state is not None:
        result["requestState"] = state
    return result


def retries(upstream: ModernUpstream) -> list[dict[str, Any]]:
    """The params of every ``tools/call`` the upstream received, in order."""
    return [call.json["params"] for call in upstream.calls("tools/call")]


@dataclass
class InputUpstream(ModernUpstream):
    tools: list[dict[str, Any]] = field(default_factory=lambda: [echo_tool("echo"), *INPUT_TOOLS])
    raw_round: dict[str, Any] = field(default_factory=lambda: asking({"r": ROOTS}, None))

    def tool_calls(self) -> list[Recorded]:
        return self.calls("tools/call")

    def _call_result(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments") or {}
        state = params.get("requestState")
        answers = params.get("inputResponses") or {}
        if name == "confirm_delete":
            answer = answers.get("confirm")
            if state != "up:confirm_delete:1" or not isinstance(answer, dict):
                return asking(
                    {"confirm": form(f"Delete {args.get('path')}?", confirm={"type": "boolean"})},
                    "up:confirm_delete:1",
                )
            confirmed = answer.get("action") == "accept" and (answer.get("content") or {}).get(
                "confirm"
            )
            return _text(f"{'Deleted' if confirmed else 'Kept'} {args.get('path')}")
        if name == "summarize":
            answer = answers.get("summary")
            if not isinstance(answer, dict):
                return asking({"summary": SAMPLING}, None)
            return _text(f"Summary: {answer['content']['text']}")
        if name == "workspace":
            answer = answers.get("roots")
            if not isinstance(answer, dict):
                return asking({"roots": ROOTS}, "up:workspace:1")
            return _text(" ".join(root["uri"] for root in answer["roots"]))
        if name == "book_trip":
            return self._book_trip(args, state, answers)
        if name == "refresh":
            if state != "up:refresh:1":
                return asking(None, "up:refresh:1")
            return _text("refreshed")
        if name == "everything":
            if not answers:
                return asking(
                    {
                        "confirm": form("Go?", go={"type": "boolean"}),
                        "summary": SAMPLING,
                        "roots": ROOTS,
                    },
                    "up:everything:1",
                )
            return _text(json.dumps(sorted(answers)))
        if name == "raw":
            return self.raw_round
        if name == "endless":
            return asking({"again": form("Once more?", ok={"type": "boolean"})}, "up:endless")
        return super()._call_result(params)

    @staticmethod
    def _book_trip(args: dict[str, Any], state: Any, answers: dict[str, Any]) -> dict[str, Any]:
        city = args.get("city")
        if state == "up:book_trip:r1" and isinstance(answers.get("dates"), dict):
            dates = answers["dates"].get("content", {}).get("dates")
            return asking(
                {"sure": form(f"Book {city} on {dates}?", sure={"type": "boolean"})},
                f"up:book_trip:r2:{dates}",
            )
        if isinstance(state, str) and state.startswith("up:book_trip:r2:"):
            answer = answers.get("sure") or {}
            if answer.get("action") == "accept":
                return _text(f"Booked {city} on {state.removeprefix('up:book_trip:r2:')}")
            return _text("Not booked")
        return asking(
            {"dates": form(f"When to {city}?", dates={"type": "string"})}, "up:book_trip:r1"
        )
