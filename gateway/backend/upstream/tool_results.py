"""MCP 2026-07-28 server/tools.mdx §Error Handling: upstream outcomes as tool results.

The one failure rule (docs/backends.md §Failure mapping): every upstream fault during
``tools/call`` becomes an HTTP 200 ``CallToolResult`` with ``isError: true`` and one fixed short
text. The upstream's own words, status codes and internals never reach the client. Tool
execution errors belong in ``isError`` results (tools.mdx: "so the model can correct itself"),
and the gateway's front door keeps its JSON-RPC errors for requests it rejects itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway.backend.upstream.rpc import FaultKind
from gateway.observability.logging import get_logger
from gateway.observability.metric_labels import BackendOutcome
from gateway.protocol.capabilities import known_capabilities
from gateway.protocol.input_required import parse_input_required
from gateway.protocol.results import tool_error_result
from gateway.seams import InputRequired

__all__ = [
    "CAPABILITY_TEXT",
    "FAILED_TEXT",
    "INVALID_ARGUMENTS_TEXT",
    "MISSING_CAPABILITY_CODE",
    "REJECTED_TEXT",
    "TASKS_WITHHELD_TEXT",
    "TIMEOUT_TEXT",
    "TOO_LARGE_TEXT",
    "failed_call",
    "fault_outcome",
    "fault_text",
    "input_required",
    "missing_capability_data",
    "sanitize_result",
]

INVALID_ARGUMENTS_TEXT: Final = (
    "Invalid arguments: the arguments do not match the tool's input schema"
)
TIMEOUT_TEXT: Final = "Upstream tool timed out"
TOO_LARGE_TEXT: Final = "Upstream reply too large"
FAILED_TEXT: Final = "Upstream tool failed"
REJECTED_TEXT: Final = "Upstream rejected the tool call"
CAPABILITY_TEXT: Final = (
    "The tool requires a client capability (such as elicitation or sampling) that the gateway "
    "forwards only for MCP 2026-07-28 clients"
)
"""Legacy clients declared their capabilities in ``initialize``, which the stateless gateway
answers itself and does not keep; an upstream -32021 for them is this tool error."""
MISSING_CAPABILITY_CODE: Final = -32021
TASKS_WITHHELD_TEXT: Final = (
    "The tool runs only as a task, which the gateway does not allow for this call"
)
"""An upstream -32021 naming the tasks extension, for a client that declared it but whose call
the gateway may not let become a task (the policy's ``tasks:``, or tasks off)."""

_log = get_logger("gateway.backend")

# Keys the gateway owns on a CallToolResult: everything else the upstream sends is dropped.
_PASSTHROUGH: Final = ("content", "structuredContent", "isError", "_meta")
_OWNED_META: Final = frozenset({"io.modelcontextprotocol/serverInfo"})


def failed_call(
    backend: str, tool: str, kind: str, **facts: object
) -> tuple[dict[str, Any], BackendOutcome]:
    """A reply that broke a rule of the protocol: logged (``backend_call_failed`` with its
    ``kind`` and ``facts``, never the upstream's words), answered with :data:`FAILED_TEXT`."""
    _log.warning("backend_call_failed", backend=backend, tool=tool, kind=kind, **facts)
    return tool_error_result(FAILED_TEXT), "upstream_error"


def fault_outcome(kind: FaultKind) -> BackendOutcome:
    if kind == "timeout":
        return "timeout"
    if kind == "too_large":
        return "too_large"
    return "upstream_error"


def fault_text(kind: FaultKind) -> str:
    if kind == "timeout":
        return TIMEOUT_TEXT
    if kind == "too_large":
        return TOO_LARGE_TEXT
    return FAILED_TEXT


def sanitize_result(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The client-facing CallToolResult, or None when the upstream's shape is wrong.

    Checks (schema ``CallToolResult``): ``content`` is an array of objects with a string
    ``type``; ``isError`` is a boolean when present; ``_meta`` an object when present. An
    ``input_required`` (MRTR) result is not a CallToolResult: see :func:`input_required`.
    """
    result_type = result.get("resultType", "complete")
    if result_type != "complete":
        return None
    content = result.get("content")
    if not isinstance(content, list) or not all(
        isinstance(block, dict) and isinstance(block.get("type"), str) for block in content
    ):
        return None
    if "isError" in result and not isinstance(result["isError"], bool):
        return None
    meta = result.get("_meta")
    if meta is not None and not isinstance(meta, dict):
        return None
    clean = {key: result[key] for key in _PASSTHROUGH if key in result}
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if k not in _OWNED_META}
        if kept:
            clean["_meta"] = kept
        else:
            del clean["_meta"]
    return clean


def input_required(
    result: Mapping[str, Any], *, backend: str, max_state_bytes: int
) -> InputRequired:
    """An upstream ``InputRequiredResult`` (2026-07-28 basic/patterns/mrtr.mdx), validated and
    rebuilt for the front door to seal (:mod:`gateway.http.methods.input_rounds`).

    Raises :class:`~gateway.protocol.input_required.InvalidInputRequired` when its shape breaks
    a rule of :func:`~gateway.protocol.input_required.parse_input_required` (the caller answers
    the fixed failure text, as for any garbled result)."""
    found = parse_input_required(result, max_state_bytes=max_state_bytes)
    return InputRequired(backend=backend, requests=found.requests, state=found.state)


def missing_capability_data(error: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` of an upstream -32021, rebuilt: ``requiredCapabilities`` with known keys only
    (schema ``MissingRequiredClientCapabilityError``); the upstream's message is never used."""
    data = error.get("data")
    required = data.get("requiredCapabilities") if isinstance(data, Mapping) else None
    return {"requiredCapabilities": known_capabilities(required)}
