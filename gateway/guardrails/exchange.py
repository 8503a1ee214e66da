"""The exchange with a processor: the message the gateway posts and the verdict it reads back.

Modelled on agentgateway's ExtMCP (``crates/protos/proto/ext_mcp.proto``: ``McpRequest`` /
``McpResponse`` in, ``McpRequestResult`` / ``McpResponseResult`` out), in the proto3 JSON
mapping (lowerCamelCase member names), so a processor written for it ports with a thin HTTP
front. Two differences, both documented (docs/policy.md#the-exchange): the fields ExtMCP carries
as raw JSON bytes (``mcp_request``, ``mcp_response``, ``mutated``) are the JSON values
themselves, not base64 strings; and ``phase`` says which of the two calls a message is, since
both arrive at one URL.

The message (one JSON object):

* ``phase``: ``request`` (a ``tools/call``'s params before the backend gets them) or
  ``response`` (a result, or a user's answer to an input request);
* ``serviceNames``: ``[backend]``; ``method``: the MCP method (for an answer, the input
  request's: ``elicitation/create`` ...);
* ``mcpRequest``: ``{"name": tool, "arguments": {...}}`` (request phase), or ``mcpResponse``:
  the result or the answer (response phase);
* ``metadataContext``: ``check``, ``target`` (tool or prompt name, resource URI),
  ``backend``, ``rule``, ``policyVersion``, ``catalogPin`` (a tool's: the SHA-256 of its
  definition as clients see it), ``requestId`` and ``principal`` (``issuer``, ``subject``,
  ``clientId`` and the configured ``claims``). Never the caller's token or a header.

The verdict: exactly one of ``pass`` (any value), ``mutated`` (the new params, of which only
``arguments`` is taken and ``name`` must not change; or the new result or answer) and ``error``
(``{"code": "PERMISSION_DENIED" | ..., "reason": "..."}``: any code refuses; the reason is shown
to the client, bounded). Other members (``headerMutation``, ``metadata``) are ignored: the
gateway builds the backend request itself.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from gateway.jsonkit.read import UNBOUNDED, JsonError, answer, peer_limits
from gateway.jsonkit.write import canonical, compact
from gateway.seams import GuardedContent, Principal, find_claim

__all__ = ["MAX_REASON_CHARS", "Verdict", "message", "read_verdict"]

MAX_REASON_CHARS: Final = 256
"""A processor's reason is cut to this many characters before the client sees it."""
_CONTROLS: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069]")
_VERDICTS: Final = ("pass", "mutated", "error")
_VERDICT_LIMITS: Final = peer_limits(UNBOUNDED)
"""As a backend's reply is read: bounded by ``max_body_bytes`` as it is read, its depth only by
the interpreter's (a changed result may nest as deep as the result it changes)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a processor answered: pass, a changed copy, or a refusal with its reason."""

    kind: Literal["pass", "mutated", "deny", "invalid"]
    """``invalid``: a change of the wrong form (refused like a change that fails its checks)."""
    changed: Mapping[str, Any] | None = None
    """``mutated``: the new content (for the request phase: the new ``arguments``)."""
    reason: str | None = None
    """``deny``: the processor's reason, cleaned for the client (None: it gave none)."""


def message(
    content: GuardedContent,
    principal: Principal,
    *,
    claims: tuple[str, ...],
    request_id: str,
) -> bytes:
    """The compact JSON message for ``content`` (the module docstring)."""
    request = content.check == "tool_arguments"
    facts: dict[str, Any] = {"issuer": principal.issuer, "subject": principal.subject}
    if principal.client_id is not None:
        facts["clientId"] = principal.client_id
    shown = {}
    for name in claims:
        found, value = find_claim(principal.claims, name)
        if found:
            shown[name] = value
    if shown:
        facts["claims"] = shown
    context: dict[str, Any] = {
        "check": content.check,
        "target": content.target,
        "backend": content.backend,
        "rule": content.rule,
        "policyVersion": content.policy_version,
        "requestId": request_id,
        "principal": facts,
    }
    if content.tool is not None:
        context["catalogPin"] = hashlib.sha256(canonical(content.tool.definition)).hexdigest()
    body: dict[str, Any] = {
        "phase": "request" if request else "response",
        "serviceNames": [content.backend],
        "method": content.method,
        "metadataContext": context,
    }
    if request:
        body["mcpRequest"] = {"name": content.target, "arguments": content.content}
    else:
        body["mcpResponse"] = content.content
    return compact(body)


def read_verdict(
    status: int, content_type: str, body: bytes, content: GuardedContent
) -> Verdict | None:
    """The verdict in a processor's answer, or None when it is none (not 200, not one strict
    JSON object, not exactly one of the three). A change of the wrong form (not an object;
    for a request, arguments that are not an object or another tool's name) is ``invalid``."""
    if status != 200:
        return None
    try:
        found = answer(content_type, body, _VERDICT_LIMITS)
    except JsonError:
        return None
    present = [name for name in _VERDICTS if name in found]
    if len(present) != 1:
        return None
    kind = present[0]
    if kind == "pass":
        return Verdict("pass")
    if kind == "error":
        refusal = found["error"]
        if not isinstance(refusal, Mapping):
            return None
        reason = refusal.get("reason")
        return Verdict("deny", reason=_cleaned(reason) if isinstance(reason, str) else None)
    changed = found["mutated"]
    if not isinstance(changed, dict):
        return Verdict("invalid")
    if content.check != "tool_arguments":
        return Verdict("mutated", changed=changed)
    # ExtMCP's mutated request is the whole params: only the arguments may change.
    arguments = changed.get("arguments", {})
    if changed.get("name", content.target) != content.target or not isinstance(arguments, dict):
        return Verdict("invalid")
    return Verdict("mutated", changed=arguments)


def _cleaned(reason: str) -> str | None:
    """A reason fit for an error body: no control or invisible characters, bounded."""
    text = " ".join(_CONTROLS.sub(" ", reason).split())[:MAX_REASON_CHARS]
    return text or None
