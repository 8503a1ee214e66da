"""The admitted MCP message: what :func:`~gateway.protocol.classify.classify` hands upward
(MCP 2026-07-28 basic/index.mdx §Messages; 2025-06-18 basic/index.mdx §Messages).

Everything the later pipeline steps (policy, dispatch, backend) need is extracted and validated
once, here; they never look at the raw body or the raw headers again (architecture invariant 5,
canonical forwarding).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from gateway.errors import GatewayError, JsonRpcId
from gateway.seams import Era

__all__ = ["EMPTY", "LIST_CHANGED", "Completion", "McpMessage"]

EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
LIST_CHANGED: Final = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}
"""Each list a server may announce a change of -> the notification that announces it."""
"""Shared read-only empty mapping used as the default of every mapping field."""


def _empty() -> Mapping[str, Any]:
    return EMPTY


@dataclass(frozen=True, slots=True)
class Completion:
    """A validated ``completion/complete`` (2026-07-28 server/utilities/completion.mdx)."""

    ref_type: str
    """``ref/prompt`` or ``ref/resource``."""
    ref: str
    """The prompt's name or the resource template's URI template."""
    argument: str
    value: str
    context: Mapping[str, str]
    """``context.arguments``: previously resolved arguments (empty when absent)."""


@dataclass(frozen=True, slots=True)
class McpMessage:
    """One validated JSON-RPC request or notification, routed to its protocol era."""

    era: Era
    version: str
    """The protocol revision the request is served under: ``2026-07-28`` on the modern path;
    on the legacy path the ``MCP-Protocol-Version`` header, ``2025-03-26`` when the header is
    absent, or for ``initialize`` the version the gateway will answer with."""
    id: JsonRpcId | None
    """The request id (a string of at most 128 UTF-8 bytes or an integer within ±(2^53-1));
    None for a notification."""
    method: str
    params: Mapping[str, Any]
    """The ``params`` object as decoded (empty when absent); treat as read-only."""
    tool_name: str | None = None
    """``params.name`` of a ``tools/call``."""
    arguments: Mapping[str, Any] = field(default_factory=_empty)
    """``params.arguments`` of a ``tools/call`` (empty when absent)."""
    cursor: str | None = None
    """``params.cursor`` of a ``tools/list``, ``prompts/list``, ``resources/list`` or
    ``resources/templates/list`` (opaque; checked when the page is built)."""
    prompt_name: str | None = None
    """``params.name`` of a ``prompts/get`` (its ``arguments``: :attr:`arguments`, strings)."""
    uri: str | None = None
    """``params.uri`` of a ``resources/read``."""
    completion: Completion | None = None
    """What a ``completion/complete`` asks for."""
    progress_token: str | int | None = None
    """``params._meta.progressToken`` when the client opted in to progress notifications."""
    header_params: Mapping[str, str] = field(default_factory=_empty)
    """Validated ``Mcp-Param-*`` values to forward: declared header suffix -> header value as
    received (OWS-trimmed, still base64-wrapped when the client wrapped it)."""
    client_capabilities: Mapping[str, Any] = field(default_factory=_empty)
    """Modern: ``_meta["io.modelcontextprotocol/clientCapabilities"]``; legacy ``initialize``:
    ``params.capabilities``; otherwise empty (a stateless gateway cannot remember them)."""
    request_state: str | None = None
    """Modern ``tools/call`` only: ``params.requestState`` (a retry of an input round)."""
    input_responses: Mapping[str, Any] | None = None
    """Modern ``tools/call``: ``params.inputResponses`` (an object), None when absent;
    ``tasks/update``: its ``inputResponses`` (required)."""
    task_id: str | None = None
    """``tasks/get``, ``tasks/update``, ``tasks/cancel``: ``params.taskId`` (the client's
    handle, equal to ``Mcp-Name``)."""
    rejection: GatewayError | None = None
    """Set only on members of a 2025-03-26 batch whose envelope is valid but which fail a later
    check (unknown method, bad params): answer that member with this error (it carries the
    member's id) and the other members normally (JSON-RPC 2.0 §6). Always None outside
    batches, where the failure is raised instead."""

    @property
    def is_notification(self) -> bool:
        """True for a JSON-RPC notification (no ``id``): answered 202 with an empty body."""
        return self.id is None
