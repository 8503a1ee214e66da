"""MCP version routing and request validation (MCP 2026-07-28 streamable-http.mdx §Server
Validation, basic/versioning.mdx; 2025-06-18 basic/lifecycle.mdx; 2025-03-26 §Batching).

:func:`classify` takes the decoded body (from :func:`gateway.protocol.jsonstrict.decode`) and the
request headers and returns the admitted :class:`~gateway.protocol.messages.McpMessage`, or
raises one :class:`~gateway.errors.GatewayError` row. Every raised error carries ``era`` (which
picks the legacy HTTP status) and ``request_id`` whenever the body's id is parseable.

Routing (digest §1.5), on the OWS-trimmed ``MCP-Protocol-Version`` header:

1. More than one ``MCP-Protocol-Version``, ``Mcp-Method`` or ``Mcp-Name`` line -> -32020
   (a first-copy and a last-copy reader would disagree).
2. ``2026-07-28`` -> modern ladder.
3. ``2025-11-25`` / ``2025-06-18`` / ``2025-03-26`` -> legacy profile.
4. Absent: a body carrying ``_meta["io.modelcontextprotocol/protocolVersion"]`` is a modern
   client that lost its header -> -32020; anything else -> legacy profile (``initialize``
   names its version; other requests are assumed ``2025-03-26``).
5. Any other value -> modern ladder, which ends in -32020 (header and ``_meta`` disagree) or
   -32022 (``data.supported``/``data.requested``).

Modern ladder (first failure wins; order from digest §2.5, which satisfies the spec, the
conformance suite and the reference SDK):

M1. Envelope: a JSON array, a non-object, a posted response, ``jsonrpc`` not ``"2.0"``, an
    invalid id, a missing/empty/non-string method, non-object ``params``, or members other
    than jsonrpc/id/method/params -> -32600.
M2. No ``id``: a ``notifications/*`` method is accepted (202) when the header version is
    served, else -32022; any other method without an id -> -32600.
M3. ``params._meta`` missing or not an object, ``protocolVersion`` missing or not a string,
    ``clientCapabilities`` missing or not an object -> -32602 (400, basic/index.mdx). When the
    header carries an unknown version and the body has no ``_meta`` version at all, the client
    is not speaking 2026-07-28 and gets -32022 instead, which names the versions it can use.
M4. ``MCP-Protocol-Version`` header != ``_meta`` version -> -32020.
M5. ``Mcp-Method`` absent or != ``method`` (case-sensitive) -> -32020.
M6. ``tools/call``, ``prompts/get``, ``resources/read``, ``tasks/get``, ``tasks/update``,
    ``tasks/cancel``: ``Mcp-Name`` absent, undecodable or != ``params.name`` / ``params.uri`` /
    ``params.taskId`` -> -32020.
M7. ``tools/call`` of a tool with ``x-mcp-header`` parameters: ``Mcp-Param-*`` rules -> -32020.
M8. ``_meta`` version not in ``SUPPORTED`` -> -32022.
M9. Method other than ``server/discover``, ``tools/list``, ``tools/call``, the prompts,
    resources and completion requests (``SURFACE_METHODS``) and the tasks extension's
    (this includes the removed ``initialize``, ``ping``, ``logging/setLevel``,
    ``resources/subscribe``, ``tasks/result``, ``tasks/list``, …) -> -32601 (404).
M10. Method params: ``arguments`` not an object, ``cursor`` not a string, ``progressToken``
     not a string or safe integer, unknown ``logLevel``, ``tools/call`` ``requestState`` not a
     string or ``inputResponses`` not an object (null is absent), the prompts, resources and
     completion params (:mod:`gateway.protocol.params`), a task request's ``taskId`` not a
     string or a ``tasks/update`` without an ``inputResponses`` object -> -32602.

Legacy profile (2025-03-26 / 2025-06-18 / 2025-11-25; ``Mcp-Session-Id`` is not read here, only by
the session's own requests: gateway/http/subscriptions/legacy_sessions.py):

L1. A JSON array is a batch only without a header or with ``2025-03-26``; otherwise -32600.
    Batch: 1-16 messages, no ``initialize`` inside, no repeated id, every member a valid
    envelope, else the whole batch is -32600 with id null. A member with a valid envelope
    that fails a later step (unknown method, bad params) is returned with ``rejection`` set so
    that member alone is answered with that error (JSON-RPC 2.0 §6).
L2. Envelope as M1; notifications as M2 (always accepted: the version is already served).
L3. ``initialize``: ``protocolVersion`` string, ``capabilities`` object, ``clientInfo`` object
    with string ``name`` and ``version`` -> else -32602 (HTTP 200).
L4. ``ping``, ``tools/list``, ``tools/call``, the prompts, resources and completion requests and
    ``resources/subscribe`` / ``resources/unsubscribe`` (``uri`` as ``resources/read``'s),
    params as M10; any other method (``server/discover`` included, so dual-era clients fall
    back) -> -32601 (HTTP 200).

The mirrored headers ``Mcp-Method``/``Mcp-Name``/``Mcp-Param-*`` are not compared on the legacy
profile (mcp-remote sends ``Mcp-Method`` there; client-behaviour.md §11). Tool existence and
visibility are not decided here: an unknown tool is the dispatcher's -32602 after the policy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from gateway.errors import (
    GatewayError,
    HeaderMismatch,
    InvalidParams,
    InvalidRequest,
    JsonRpcId,
    MethodNotFound,
    UnsupportedProtocolVersion,
)
from gateway.protocol.headers import Headers, check_param_headers, decode_mirrored, trim_ows
from gateway.protocol.jsonrpc import (
    MAX_ID_BYTES,
    MAX_SAFE_INTEGER,
    MISSING,
    parse_envelope,
    peek_id,
    valid_id,
)
from gateway.protocol.messages import EMPTY, McpMessage
from gateway.protocol.params import build_request
from gateway.protocol.tasks_extension import TASK_METHODS
from gateway.protocol.versions import ASSUMED_LEGACY, LEGACY, MODERN, SUPPORTED
from gateway.seams import SURFACE_METHODS, Era, ToolDef

__all__ = [
    "LEGACY_METHODS",
    "LEGACY_SUBSCRIBE_METHODS",
    "MAX_BATCH",
    "MAX_ID_BYTES",
    "MAX_SAFE_INTEGER",
    "META_CLIENT_CAPABILITIES",
    "META_PROTOCOL_VERSION",
    "MODERN_METHODS",
    "ToolLookup",
    "classify",
    "valid_id",
]

ToolLookup = Callable[[str], ToolDef | None]

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
_META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
_LOG_LEVELS: Final = frozenset(
    {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
)

MODERN_METHODS: Final = (
    frozenset({"server/discover", "tools/list", "tools/call", "subscriptions/listen"})
    | frozenset(SURFACE_METHODS)
    | TASK_METHODS
)
"""Requests served on 2026-07-28; everything else is -32601 with HTTP 404 (the tasks
extension's methods too when ``tasks:`` is off: at dispatch)."""
LEGACY_SUBSCRIBE_METHODS: Final = frozenset({"resources/subscribe", "resources/unsubscribe"})
"""2025 revisions only (server/resources.mdx §Subscriptions): a session's subscriptions, heard on
its GET stream; served when a backend can listen, else -32601 at dispatch."""
LEGACY_METHODS: Final = (
    frozenset({"initialize", "ping", "tools/list", "tools/call"})
    | frozenset(SURFACE_METHODS)
    | LEGACY_SUBSCRIBE_METHODS
)
"""Requests served on the legacy profile; everything else is -32601 with HTTP 200."""

MAX_BATCH: Final = 16
"""Largest 2025-03-26 batch accepted (one response budget covers the whole batch)."""

_PV: Final = "MCP-Protocol-Version"
_METHOD: Final = "Mcp-Method"
_NAME: Final = "Mcp-Name"
_NAMED: Final = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    **dict.fromkeys(TASK_METHODS, "taskId"),
}
"""Methods whose ``Mcp-Name`` mirrors a params member (streamable-http.mdx §Request Metadata;
the tasks extension's methods: SEP-2663 §Streamable HTTP: Routing Headers, ``params.taskId``)."""


def classify(
    headers: Headers, message: Any, tool_lookup: ToolLookup
) -> McpMessage | tuple[McpMessage, ...]:
    """Route ``message`` to its era and validate it; see the module docstring for the ladders.

    Returns one :class:`McpMessage`, or a tuple of them for a 2025-03-26 batch. Raises a
    :class:`~gateway.errors.GatewayError` subclass for the first failed check; never anything
    else, whatever ``message`` holds.
    """
    request_id = peek_id(message)
    pv_lines = headers.getall(_PV, [])
    if len(pv_lines) > 1:
        raise HeaderMismatch(request_id=request_id, era="modern", detail="duplicate version")
    pv = trim_ows(pv_lines[0]) if pv_lines else None
    era: Era = "legacy" if pv is None or pv in LEGACY else "modern"
    for name in (_METHOD, _NAME):
        if len(headers.getall(name, [])) > 1:
            raise HeaderMismatch(request_id=request_id, era=era, detail="duplicate header")

    if pv is None:
        if _meta_version_present(message):
            # A modern body without its mandatory header (streamable-http.mdx §Server Validation).
            raise HeaderMismatch(request_id=request_id, era="modern", detail="version missing")
        return _legacy(None, message, request_id)
    if pv in LEGACY:
        return _legacy(pv, message, request_id)
    return _modern(pv, headers, message, tool_lookup, request_id)


# --- modern ladder ----------------------------------------------------------------------------


def _modern(
    pv: str, headers: Headers, message: Any, lookup: ToolLookup, request_id: JsonRpcId | None
) -> McpMessage:
    era: Era = "modern"
    if isinstance(message, list):
        raise InvalidRequest(era=era, detail="batch on 2026-07-28")  # M1: no batching (§2.7)
    rid, method, params = parse_envelope(message, era, request_id)  # M1
    if rid is None:  # M2
        if pv not in SUPPORTED:
            raise _unsupported(pv, None)
        return McpMessage(era=era, version=pv, id=None, method=method, params=params)

    meta = params.get("_meta")  # M3
    if pv not in SUPPORTED and not (isinstance(meta, dict) and META_PROTOCOL_VERSION in meta):
        raise _unsupported(pv, rid)
    if not isinstance(meta, dict):
        raise InvalidParams(request_id=rid, era=era, detail="_meta missing")
    body_version = meta.get(META_PROTOCOL_VERSION)
    capabilities = meta.get(META_CLIENT_CAPABILITIES)
    if type(body_version) is not str:
        raise InvalidParams(request_id=rid, era=era, detail="_meta protocolVersion")
    if not isinstance(capabilities, dict):
        raise InvalidParams(request_id=rid, era=era, detail="_meta clientCapabilities")

    if pv != body_version:  # M4
        raise HeaderMismatch(request_id=rid, era=era, detail="MCP-Protocol-Version")
    mcp_method = headers.get(_METHOD)  # M5
    if mcp_method is None or trim_ows(mcp_method) != method:
        raise HeaderMismatch(request_id=rid, era=era, detail="Mcp-Method")
    name_member = _NAMED.get(method)  # M6
    body_name = params.get(name_member) if name_member else None
    if name_member:
        mcp_name = headers.get(_NAME)
        decoded = decode_mirrored(mcp_name) if mcp_name is not None else None
        if decoded is None or type(body_name) is not str or decoded != body_name:
            raise HeaderMismatch(request_id=rid, era=era, detail="Mcp-Name")
    header_params: Mapping[str, str] = EMPTY
    if method == "tools/call" and type(body_name) is str:  # M7
        tool = lookup(body_name)
        if tool is not None and tool.header_params:
            header_params = check_param_headers(
                headers, tool.header_params, params.get("arguments"), request_id=rid, era=era
            )
    if body_version not in SUPPORTED:  # M8
        raise _unsupported(body_version, rid)
    if method not in MODERN_METHODS:  # M9
        raise MethodNotFound(request_id=rid, era=era)

    level = meta.get(_META_LOG_LEVEL, MISSING)  # M10
    if level is not MISSING and level not in _LOG_LEVELS:
        raise InvalidParams(request_id=rid, era=era, detail="_meta logLevel")
    return build_request(
        era,
        MODERN,
        rid,
        method,
        params=params,
        meta=meta,
        client_capabilities=capabilities,
        header_params=header_params,
    )


def _unsupported(requested: str, rid: JsonRpcId | None) -> UnsupportedProtocolVersion:
    return UnsupportedProtocolVersion(
        request_id=rid,
        era="modern",
        data={"supported": list(SUPPORTED), "requested": requested},
    )


# --- legacy profile ---------------------------------------------------------------------------


def _legacy(
    pv: str | None, message: Any, request_id: JsonRpcId | None
) -> McpMessage | tuple[McpMessage, ...]:
    if isinstance(message, list):
        if pv not in (None, ASSUMED_LEGACY):
            # Batching exists only in 2025-03-26 (removed in 2025-06-18, changelog).
            raise InvalidRequest(era="legacy", detail="batch after 2025-03-26")
        return _batch(message)
    return _legacy_one(pv, message, request_id)


def _legacy_one(pv: str | None, message: Any, request_id: JsonRpcId | None) -> McpMessage:
    era: Era = "legacy"
    version = pv or ASSUMED_LEGACY
    rid, method, params = parse_envelope(message, era, request_id)
    if rid is None:
        return McpMessage(era=era, version=version, id=None, method=method, params=params)
    if method == "initialize":
        requested = params.get("protocolVersion")
        capabilities = params.get("capabilities")
        client_info = params.get("clientInfo")
        if (
            type(requested) is not str
            or not isinstance(capabilities, dict)
            or not isinstance(client_info, dict)
            or type(client_info.get("name")) is not str
            or type(client_info.get("version")) is not str
        ):
            raise InvalidParams(request_id=rid, era=era, detail="initialize params")
        meta = _legacy_meta(params, rid)
        # lifecycle.mdx §Version Negotiation: echo a supported version, else counter-offer the
        # newest one; never an error.
        negotiated = requested if requested in LEGACY else LEGACY[0]
        return build_request(
            era,
            negotiated,
            rid,
            method,
            params=params,
            meta=meta,
            client_capabilities=capabilities,
        )
    if method not in LEGACY_METHODS:
        raise MethodNotFound(request_id=rid, era=era)
    return build_request(era, version, rid, method, params=params, meta=_legacy_meta(params, rid))


def _legacy_meta(params: dict[str, Any], rid: JsonRpcId) -> dict[str, Any]:
    meta = params.get("_meta", MISSING)
    if meta is MISSING:
        return {}
    if not isinstance(meta, dict):
        raise InvalidParams(request_id=rid, era="legacy", detail="_meta not an object")
    return meta


def _batch(batch: list[Any]) -> tuple[McpMessage, ...]:
    era: Era = "legacy"
    if not 1 <= len(batch) <= MAX_BATCH:
        raise InvalidRequest(era=era, detail="batch size")
    seen: set[tuple[type, JsonRpcId]] = set()
    admitted: list[McpMessage] = []
    for item in batch:
        item_id = peek_id(item)
        try:
            rid, method, params = parse_envelope(item, era, item_id)
        except GatewayError:
            raise InvalidRequest(era=era, detail="batch member envelope") from None
        if method == "initialize":
            # 2025-03-26 lifecycle.mdx: the initialize request MUST NOT be part of a batch.
            raise InvalidRequest(era=era, detail="initialize in batch")
        if rid is not None:
            key = (type(rid), rid)
            if key in seen:
                raise InvalidRequest(era=era, detail="duplicate id in batch")
            seen.add(key)
        try:
            admitted.append(_legacy_one(ASSUMED_LEGACY, item, item_id))
        except GatewayError as error:
            admitted.append(
                McpMessage(
                    era=era,
                    version=ASSUMED_LEGACY,
                    id=rid,
                    method=method,
                    params=params,
                    rejection=error,
                )
            )
    return tuple(admitted)


def _meta_version_present(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    params = message.get("params")
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta
