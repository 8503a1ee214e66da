"""The root of the vocabulary: :class:`GatewayError` (what a status-table row carries), the
application-defined JSON-RPC codes of the HTTP-level rows, and :class:`ConfigError`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

__all__ = [
    "BAD_REQUEST_CODE",
    "FORBIDDEN_CODE",
    "NOT_IMPLEMENTED_CODE",
    "RATE_LIMITED_CODE",
    "UNAUTHORIZED_CODE",
    "UNSUPPORTED_MEDIA_TYPE_CODE",
    "ConfigError",
    "GatewayError",
    "JsonRpcId",
]

UNAUTHORIZED_CODE = -31401
"""JSON-RPC code of the 401 bodies (``no_credentials``, ``invalid_token``)."""
FORBIDDEN_CODE = -31403
"""JSON-RPC code of the 403 scope bodies (``insufficient_scope``, ``tool_insufficient_scope``).

Both are application-defined: MCP 2026-07-28 basic/index.mdx §Error codes says new codes SHOULD
sit outside the JSON-RPC reserved range (-32768..-32000), implementations SHOULD NOT use the
legacy -32000..-32019 (the -32001 seen in the field is also the Python SDK's local
REQUEST_TIMEOUT), and MUST NOT emit undefined codes from -32020..-32099."""
BAD_REQUEST_CODE = -31400
"""JSON-RPC code of the fixed 400 bodies (``malformed_request``, ``token_in_query``)."""
UNSUPPORTED_MEDIA_TYPE_CODE = -31415
"""JSON-RPC code of the 415 bodies (``unsupported_media_type``,
``unsupported_content_encoding``)."""
NOT_IMPLEMENTED_CODE = -31501
"""JSON-RPC code of the 501 body (``unsupported_transfer_coding``)."""
RATE_LIMITED_CODE = -31429
"""JSON-RPC code of the 429 body (``rate_limited``).

The same scheme as the 401/403 codes: -31000 minus the HTTP status, outside the reserved range.
These rows answer with a JSON-RPC error body because SDK clients show a non-2xx body's message
only when it is one (else "Server returned an error response")."""
JsonRpcId = str | int
"""A JSON-RPC request id as admitted by the decoder: a string or a safe integer, never null."""

Era = Literal["modern", "legacy"]


class ConfigError(Exception):
    """A configuration or policy file is invalid; ``problems`` lists every finding."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class GatewayError(Exception):
    """Root of every client-visible rejection. Subclasses are status-table rows.

    Class attributes describe the row; instance attributes carry what varies per request
    (the JSON-RPC id to answer, the scopes to challenge with, a ``Retry-After`` value, the
    ``data`` member of a JSON-RPC error).
    """

    row: ClassVar[str] = ""
    """Stable row name, used by tests (``@pytest.mark.row``) and the ``docs/errors.md`` table."""
    status: ClassVar[int] = 500
    legacy_status: ClassVar[int | None] = None
    """HTTP status on the legacy (initialize-based) path, when it differs from ``status``."""
    jsonrpc_code: ClassVar[int | None] = None
    oauth_error: ClassVar[str | None] = None
    """RFC 6750 ``error=`` value; ``NoCredentials`` has a challenge without one (RFC 6750 §3.1)."""
    challenge: ClassVar[bool] = False
    """Whether the response carries ``WWW-Authenticate: Bearer ...``."""
    body_code: ClassVar[int | None] = None
    """JSON-RPC code of the body of an HTTP-level row that answers with a JSON-RPC error
    without being a JSON-RPC row (401/403: a 2025-03-26 batch is still refused as a whole)."""
    message: ClassVar[str] = "Internal error"
    batch_member_code: ClassVar[int | None] = None
    """For an HTTP-level row raised while one member of a 2025-03-26 batch runs (after earlier
    members may have run): that member's JSON-RPC error code, instead of answering the whole
    batch (whose other results would be lost)."""

    def __init__(
        self,
        *,
        request_id: JsonRpcId | None = None,
        scopes: tuple[str, ...] = (),
        retry_after: int | None = None,
        data: Mapping[str, Any] | None = None,
        detail: str = "",
        era: Era | None = None,
    ) -> None:
        super().__init__(detail or self.message)
        self.era = era
        """The protocol era the request was routed to, when known (picks the legacy status)."""
        self.request_id = request_id
        self.scopes = scopes
        self.retry_after = retry_after
        self.data = data
        self.detail = detail
        """For logs only; never rendered to the client."""

    def status_for(self, era: Era | None = None) -> int:
        era = era or self.era
        if era == "legacy" and self.legacy_status is not None:
            return self.legacy_status
        return self.status

    @property
    def wire_code(self) -> int | None:
        """The JSON-RPC code the rendered body carries, if it is a JSON-RPC error."""
        return self.jsonrpc_code if self.jsonrpc_code is not None else self.body_code

    def body_message(self) -> str:
        """The body's message: the fixed ``message`` unless the row names what is missing."""
        return self.message

    def body_data(self) -> Mapping[str, Any] | None:
        """The body's ``data`` member; only rows whose data the gateway builds have one."""
        return None
