"""The JSON-RPC / MCP rows: an error answered as a JSON-RPC error object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from gateway.errors._base import GatewayError

__all__ = [
    "AmbiguousResourceUri",
    "ArgumentNotSettable",
    "BackendFailure",
    "HeaderMismatch",
    "InternalError",
    "InvalidParams",
    "InvalidPromptArguments",
    "InvalidRequest",
    "InvalidRequestState",
    "LegacyResourceNotFound",
    "MethodNotFound",
    "MissingClientCapability",
    "ParseError",
    "ResourceNotFound",
    "UnknownPrompt",
    "UnknownTask",
    "UnknownTool",
    "UnsupportedProtocolVersion",
    "UrlElicitationRequired",
]


class ParseError(GatewayError):
    row, status, jsonrpc_code, message = "parse_error", 400, -32700, "Parse error"


class InvalidRequest(GatewayError):
    row, status, jsonrpc_code, message = "invalid_request", 400, -32600, "Invalid Request"


class HeaderMismatch(GatewayError):
    row, status, jsonrpc_code, message = "header_mismatch", 400, -32020, "Header mismatch"


class InvalidParams(GatewayError):
    """Missing or malformed params (modern ``_meta`` keys, a bad cursor, bad initialize params)."""

    row, status, jsonrpc_code, message = "invalid_params", 400, -32602, "Invalid params"
    legacy_status = 200


class UnsupportedProtocolVersion(GatewayError):
    row, status, jsonrpc_code = "unsupported_version", 400, -32022
    message = "Unsupported protocol version"

    def body_data(self) -> Mapping[str, Any] | None:
        return (
            self.data
        )  # supported / requested, both validated (schema UnsupportedProtocolVersionError)


class MissingClientCapability(GatewayError):
    """The upstream needs a client capability the caller did not declare (2026-07-28 only).

    basic/index.mdx §Error codes: -32021 with ``data.requiredCapabilities``, HTTP 400 (MUST). The
    data is rebuilt by the backend from known capability keys only; the upstream's message is not.
    """

    row, status, jsonrpc_code = "missing_client_capability", 400, -32021
    message = "Missing required client capability"

    def body_message(self) -> str:
        required = (self.data or {}).get("requiredCapabilities")
        names = sorted(required) if isinstance(required, Mapping) else []
        return f"{self.message}: {', '.join(names)}" if names else self.message

    def body_data(self) -> Mapping[str, Any] | None:
        return self.data


StateRefusal = Literal[
    "invalid",
    "expired",
    "mismatch",
    "responses_missing",
    "state_missing",
    "responses_invalid",
    "responses_too_large",
]


class InvalidRequestState(GatewayError):
    """A 2026-07-28 ``tools/call`` retry whose ``requestState`` or ``inputResponses`` is refused.

    basic/patterns/mrtr.mdx §Server Requirements: ``requestState`` is attacker-controlled and
    state that fails verification MUST be rejected. One row, one fixed message per ``reason``
    (docs/errors.md); which binding failed goes to ``detail`` (logs) only. Nothing is sent
    upstream for any of them.
    """

    row, status, jsonrpc_code = "invalid_request_state", 400, -32602
    message = "Invalid requestState"
    MESSAGES: ClassVar[Mapping[str, str]] = {
        "invalid": "Invalid requestState",
        "expired": "Expired requestState: call the tool again without it",
        "mismatch": "requestState does not match this request",
        "responses_missing": "inputResponses are required with this requestState",
        "state_missing": "inputResponses need the requestState they answer",
        "responses_invalid": "Invalid inputResponses",
        "responses_too_large": "inputResponses too large",
    }

    def __init__(self, reason: StateRefusal, *, detail: str = "", **kwargs: Any) -> None:
        super().__init__(detail=detail or reason, **kwargs)
        self.reason: StateRefusal = reason

    def body_message(self) -> str:
        return self.MESSAGES[self.reason]


class MethodNotFound(GatewayError):
    # Modern: 404 is a MUST (streamable-http.mdx). Legacy: 200, because rmcp and others treat a
    # 404 as an expired session and re-initialize (digest §6 item 10).
    row, status, jsonrpc_code, message = "method_not_found", 404, -32601, "Method not found"
    legacy_status = 200


class UnknownTool(GatewayError):
    """A tool that does not exist, or that the caller may not see (no existence leak)."""

    row, status, jsonrpc_code, message = "unknown_tool", 400, -32602, "Unknown tool"
    legacy_status = 200


class UnknownTask(GatewayError):
    """A task request (``tasks/get``, ``tasks/update``, ``tasks/cancel``) the gateway answers as
    for a task that does not exist: a handle it did not mint, tampered with, expired, another
    caller's (subject, client, issuer), of a backend no longer configured or a tool the policy
    no longer lets the caller call as a task, or a task its backend does not know.

    SEP-2663 §Error Handling: an invalid or nonexistent ``taskId`` is -32602. One fixed answer
    for every case, so a caller learns nothing about another's tasks; why goes to the audit
    trail only. Nothing is sent upstream for any of them (but the last)."""

    row, status, jsonrpc_code, message = "unknown_task", 400, -32602, "Task not found"


class ArgumentNotSettable(GatewayError):
    """``tools/call`` sets an argument the policy's ``override:`` fixes or hides.

    The caller cannot set it (docs/policy.md#overrides): refused before anything goes
    upstream, never silently replaced. -32602 like any invalid ``tools/call`` params. The
    message and ``data.arguments`` name the arguments, from the policy only (each is a policy
    name the request also used, never a value)."""

    row, status, jsonrpc_code = "argument_not_settable", 400, -32602
    message = "Arguments set by the gateway cannot be set by the caller"
    legacy_status = 200

    def __init__(self, *, arguments: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.arguments = arguments

    def body_message(self) -> str:
        return f"{self.message}: {', '.join(self.arguments)}"

    def body_data(self) -> Mapping[str, Any] | None:
        return {"arguments": list(self.arguments)}


class UnknownPrompt(GatewayError):
    """A prompt that does not exist, or that the caller may not see (no existence leak)."""

    row, status, jsonrpc_code, message = "unknown_prompt", 400, -32602, "Unknown prompt"
    legacy_status = 200


class ResourceNotFound(GatewayError):
    """2026-07-28: a resource that does not exist or that the caller may not see. The modern
    revision answers -32602 (server/resources.mdx §Error Handling; -32002 is retired)."""

    row, status, jsonrpc_code, message = "resource_not_found", 400, -32602, "Resource not found"


class AmbiguousResourceUri(GatewayError):
    """A resource URI with no one normal form (an encoded ``/`` or ``\\``, a backslash, an empty
    path segment, a dot segment above the root, a control character): a server that decodes or
    collapses it could read another resource than the one the policy decided on. Refused in both
    eras with -32602 before any rule is looked at (it depends on the URI's bytes only)."""

    row, status, jsonrpc_code = "ambiguous_resource_uri", 400, -32602
    message = "Ambiguous resource URI"
    legacy_status = 200


class LegacyResourceNotFound(GatewayError):
    """2025 revisions: the same answer with the code they define, -32002 (resources.mdx)."""

    row, status, jsonrpc_code = "legacy_resource_not_found", 200, -32002
    message = "Resource not found"


class InvalidPromptArguments(GatewayError):
    """``prompts/get`` arguments that do not match what the prompt declares."""

    row, status, jsonrpc_code = "invalid_prompt_arguments", 400, -32602
    message = "Invalid prompt arguments"
    legacy_status = 200


class BackendFailure(GatewayError):
    """Transport-level upstream fault outside a tool result (e.g. tools/list upstream failure)."""

    row, status, jsonrpc_code, message = "backend_failure", 502, -32603, "Upstream server error"
    legacy_status = 200


class InternalError(GatewayError):
    row, status, jsonrpc_code, message = "internal_error", 500, -32603, "Internal error"


class UrlElicitationRequired(GatewayError):
    """A 2025-11-25 client's request needs the caller's account at a ``user_oauth`` backend,
    which is not connected (or must be connected again): the spec's URL elicitation required
    error (2025-11-25 client/elicitation.mdx §URL Elicitation Required Error, ``-32042``), whose
    ``data.elicitations`` holds one URL elicitation to the gateway's consent link. Never on the
    2026-07-28 path, which gets an input-required result instead (or a tool error)."""

    row, jsonrpc_code = "url_elicitation_required", -32042
    status = legacy_status = 200
    message = "This request requires connecting your account: open the link to continue"

    def body_data(self) -> Mapping[str, Any] | None:
        return self.data
