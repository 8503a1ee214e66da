"""The headers of every upstream request that are the gateway's own (the rest is the
protocol's: :mod:`.link`): request id, W3C trace context, identity headers and the caller
assertion, and the trace context in a modern request's ``_meta``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from gateway.backend.credentials.caller_assertion import AssertionSigner
from gateway.backend.upstream.tool_headers import encode_header_value, is_header_safe
from gateway.config import BackendConfig
from gateway.seams import Principal, RequestContext, ToolDef

__all__ = ["CLIENT_ID_HEADER", "SUBJECT_HEADER", "gateway_headers", "with_trace"]

SUBJECT_HEADER: Final = "X-MCP-Gateway-Subject"
CLIENT_ID_HEADER: Final = "X-MCP-Gateway-Client-Id"

# W3C Trace Context §3.2 / §3.3: forwarded only when well-formed.
_TRACEPARENT: Final = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")
_MAX_TRACESTATE: Final = 512
_TRACE_KEYS: Final = ("traceparent", "tracestate")
_REQUEST_ID: Final = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def gateway_headers(
    settings: BackendConfig,
    principal: Principal,
    ctx: RequestContext,
    trace: tuple[str | None, str | None],
    *,
    signer: AssertionSigner | None,
    called: ToolDef,
) -> dict[str, str]:
    """The only non-protocol headers an upstream request carries, all chosen by the gateway:
    the request id, the trace context (``trace``: traceparent, tracestate), the identity
    headers and, with a configured signer, the caller assertion naming what is ``called``
    (the tool, or the method as a tool of that name)."""
    traceparent, tracestate = trace
    headers: dict[str, str] = {}
    if _REQUEST_ID.fullmatch(ctx.request_id):
        headers["X-Request-Id"] = ctx.request_id
    if traceparent is not None and _TRACEPARENT.fullmatch(traceparent):
        headers["traceparent"] = traceparent
        if tracestate and len(tracestate) <= _MAX_TRACESTATE and is_header_safe(tracestate):
            headers["tracestate"] = tracestate
    if settings.identity_headers:
        headers[SUBJECT_HEADER] = encode_header_value(principal.subject)
        if principal.client_id:
            headers[CLIENT_ID_HEADER] = encode_header_value(principal.client_id)
    if signer is not None:
        headers[signer.header] = signer.assertion(called, principal, ctx)
    return headers


def with_trace(meta: dict[str, Any], headers: Mapping[str, str]) -> dict[str, Any]:
    """A modern request's ``_meta`` with the trace context of its headers: SEP-414 (2026-07-28
    basic/index.mdx §OpenTelemetry trace context) reserves ``traceparent``/``tracestate`` there.
    The gateway's own values; the client's ``_meta`` is never forwarded."""
    for key in _TRACE_KEYS:
        value = headers.get(key)
        if value is not None:
            meta[key] = value
    return meta
