"""MCP Streamable HTTP (2026-07-28 streamable-http.mdx §Sending Messages), client side: one POST.

:func:`exchange` sends one gateway-built JSON-RPC message to the upstream and reads the answer,
which may be ``application/json`` (one object) or ``text/event-stream`` (notifications, then the
final response). SSE is parsed incrementally with bounds; ``notifications/progress`` carrying the
gateway's progress token is relayed through ``on_progress``, ``notifications/tools/list_changed``
calls ``on_list_changed``; other notifications and any server requests are dropped. The reply
must be a JSON-RPC 2.0 response with the request's id.

Every failure raises :class:`UpstreamFault` with a ``kind`` from a fixed vocabulary; its message
never contains upstream text. Leaving :func:`exchange` early (cancellation, a fault) closes the
connection, which aborts the upstream request.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from gateway.backend.upstream.sse_parser import SseError, SseParser, SseTooLarge
from gateway.errors import JsonRpcId
from gateway.jsonkit.read import UNBOUNDED, JsonError, loads, peer_limits
from gateway.jsonkit.write import compact
from gateway.outbound.client import Outbound
from gateway.outbound.failures import OutboundError, OutboundFailure
from gateway.outbound.responses import StreamingResponse
from gateway.protocol.messages import LIST_CHANGED

__all__ = [
    "SSE_STREAM_FACTOR",
    "FaultKind",
    "ProgressSink",
    "Reply",
    "UpstreamFault",
    "backend_destination",
    "decode_json",
    "encode_json",
    "exchange",
    "insufficient_scope",
]


def backend_destination(backend: str) -> str:
    """The :class:`gateway.outbound.client.Destination` of one backend: a pool of its own, so a slow
    backend cannot hold the connections another one needs."""
    return f"backend:{backend}"


SSE_STREAM_FACTOR: Final = 8
"""An SSE reply may total this many times the reply cap (progress events add up); each event,
and the final response, must still fit in the cap itself."""

FaultKind = Literal[
    "timeout",
    "too_large",
    "connection",
    "redirect",
    "unauthorized",
    "not_found",
    "http_status",
    "garbled",
    "wrong_id",
    "credential",
    "incompatible",
    "insufficient_scope",
]
_OUTBOUND_FAULTS: Final[dict[OutboundFailure, FaultKind]] = {
    "timeout": "timeout",
    "too_large": "too_large",
    "redirect": "redirect",
}
"""The outbound failures with a fault kind of their own; the others are ``connection``."""
ProgressSink = Callable[[Mapping[str, Any]], Awaitable[None]]


class UpstreamFault(Exception):
    """One upstream failure; ``kind`` is what the failure mapping and the logs use."""

    def __init__(
        self, kind: FaultKind, status: int | None = None, *, scope: str | None = None
    ) -> None:
        super().__init__(kind)
        self.kind: FaultKind = kind
        self.status = status
        self.scope = scope
        """``insufficient_scope``: the ``scope`` of the upstream's challenge, if it named one."""


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    message: Mapping[str, Any] | None
    """The JSON-RPC response (``result`` or ``error``); None for 202 Accepted."""
    session_id: str | None = None
    """``Mcp-Session-Id`` of the reply, if any (legacy upstreams mint it on initialize)."""


def encode_json(value: Any) -> bytes:
    """Canonical JSON bytes: compact, sorted keys, UTF-8, no NaN (canonical forwarding)."""
    return compact(value, sort_keys=True)


_REPLY_LIMITS: Final = peer_limits(UNBOUNDED)
"""A reply is bounded by ``max_bytes`` as it is read; its depth only by the interpreter's
recursion limit (a reply nested that deep is garbled)."""


def decode_json(data: bytes | str) -> Any:
    """Strict decoding of an upstream reply (:func:`gateway.jsonkit.loads`): UTF-8 without a
    byte order mark, no duplicate keys, no NaN/Infinity, no lone surrogates."""
    try:
        return loads(data, _REPLY_LIMITS)
    except JsonError as exc:
        raise UpstreamFault("garbled") from exc


_CHALLENGE_ERROR: Final = re.compile(r'(?:^|[\s,])error="insufficient_scope"', re.IGNORECASE)
_CHALLENGE_SCOPE: Final = re.compile(r'(?:^|[\s,])scope="([\x21\x23-\x5b\x5d-\x7e ]{1,1024})"')


def insufficient_scope(challenge: str) -> str | None:
    """The scope a ``Bearer error="insufficient_scope"`` challenge names (RFC 6750 §3.1), ""
    when it names none, None when the 403 is not such a challenge. Bounded: at most 4 KiB read."""
    challenge = challenge[:4096]
    if not _CHALLENGE_ERROR.search(challenge):
        return None
    found = _CHALLENGE_SCOPE.search(challenge)
    return found.group(1).strip() if found else ""


def _is_response(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and "method" not in message
        and ("result" in message) != ("error" in message)
    )


def _check_response(message: Any, request_id: JsonRpcId) -> Mapping[str, Any]:
    """Shape and id of a final JSON-RPC response (JSON-RPC 2.0 §5)."""
    if not _is_response(message):
        raise UpstreamFault("garbled")
    if "error" in message:
        error = message["error"]
        if not isinstance(error, dict) or not _is_int(error.get("code")):
            raise UpstreamFault("garbled")
        # An error the peer could not tie to a request carries id null (JSON-RPC 2.0 §5).
        if message.get("id") not in (request_id, None):
            raise UpstreamFault("wrong_id")
        return message  # type: ignore[no-any-return]
    if not _same_id(message.get("id"), request_id):
        raise UpstreamFault("wrong_id")
    if not isinstance(message["result"], dict):
        raise UpstreamFault("garbled")
    return message  # type: ignore[no-any-return]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _same_id(got: Any, want: JsonRpcId) -> bool:
    return type(got) is type(want) and got == want


async def exchange(
    outbound: Outbound,
    destination: str,
    url: str,
    *,
    body: bytes,
    headers: Mapping[str, str],
    request_id: JsonRpcId | None,
    deadline: float,
    max_bytes: int,
    progress_token: str | None = None,
    on_progress: ProgressSink | None = None,
    on_list_changed: Callable[[], None] | None = None,
) -> Reply:
    """POST ``body`` and return the final response (see the module docstring)."""
    try:
        async with outbound.stream(
            destination,
            "POST",
            url,
            deadline=deadline,
            headers=headers,
            body=body,
            max_body=max_bytes * SSE_STREAM_FACTOR,
        ) as response:
            reading = _Reading(request_id, max_bytes, progress_token, on_progress, on_list_changed)
            return await _read_reply(response, reading)
    except OutboundError as exc:
        raise UpstreamFault(_OUTBOUND_FAULTS.get(exc.kind, "connection")) from exc


@dataclass(frozen=True, slots=True)
class _Reading:
    """What reading one reply needs besides the response (:func:`exchange`'s arguments)."""

    request_id: JsonRpcId | None
    max_bytes: int
    progress_token: str | None
    on_progress: ProgressSink | None
    on_list_changed: Callable[[], None] | None


async def _read_reply(response: StreamingResponse, reading: _Reading) -> Reply:
    request_id, max_bytes = reading.request_id, reading.max_bytes
    status = response.status
    session_id = response.headers.get("Mcp-Session-Id")
    if status == 401:
        raise UpstreamFault("unauthorized", status)
    if status == 404:
        raise UpstreamFault("not_found", status)
    if status == 403:
        scope = insufficient_scope(response.headers.get("WWW-Authenticate", ""))
        if scope is not None:
            raise UpstreamFault("insufficient_scope", status, scope=scope or None)
    if request_id is None and 200 <= status < 300:
        # A notification was accepted (202 per spec; some servers say 200). Drain the body so
        # the connection goes back to the pool.
        await _read_json_body(response, max_bytes, allow_empty=True)
        return Reply(status, None, session_id)
    if request_id is None:
        raise UpstreamFault("http_status", status)
    kind = response.content_type
    if status != 200:
        # A JSON-RPC error on a 4xx (modern -32020/-32022, -32602...) is still an answer.
        if kind == "application/json" and 400 <= status < 500:
            message = decode_json(await _read_json_body(response, max_bytes))
            if _is_response(message) and "error" in message:
                return Reply(status, _check_response(message, request_id), session_id)
        raise UpstreamFault("http_status", status)
    if kind == "application/json":
        message = decode_json(await _read_json_body(response, max_bytes))
        return Reply(status, _check_response(message, request_id), session_id)
    if kind == "text/event-stream":
        message = await _read_sse(response, request_id, reading)
        return Reply(status, message, session_id)
    raise UpstreamFault("garbled", status)


async def _read_json_body(
    response: StreamingResponse, max_bytes: int, *, allow_empty: bool = False
) -> bytes:
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise UpstreamFault("too_large")
    if declared.isdigit():
        data = await response.read()  # one read: the declared length is within the cap
    else:
        parts: list[bytes] = []
        size = 0
        async for chunk in response.chunks():
            size += len(chunk)
            if size > max_bytes:
                raise UpstreamFault("too_large")
            parts.append(chunk)
        data = b"".join(parts)
    if not data and not allow_empty:
        raise UpstreamFault("garbled")
    return data


async def _read_sse(
    response: StreamingResponse, request_id: JsonRpcId, reading: _Reading
) -> Mapping[str, Any]:
    progress_token, on_progress = reading.progress_token, reading.on_progress
    on_list_changed = reading.on_list_changed
    parser = SseParser(max_line=reading.max_bytes + 16, max_event=reading.max_bytes)
    saw_other_id = False
    last_progress: float | None = None
    try:
        async for chunk in response.chunks():
            for event in parser.feed(chunk):
                if event.event != "message" or not event.data:
                    continue  # priming events (2025-11-25) and foreign event types
                message = decode_json(event.data)
                if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                    raise UpstreamFault("garbled")
                if "method" not in message:
                    if "error" not in message and not _same_id(message.get("id"), request_id):
                        saw_other_id = True  # not ours: keep waiting for the right one
                        continue
                    return _check_response(message, request_id)
                if "id" in message:
                    continue  # server->client request: the gateway answers none of them
                if (
                    message.get("method") == "notifications/progress"
                    and on_progress is not None
                    and progress_token is not None
                ):
                    params = message.get("params")
                    if (
                        not isinstance(params, dict)
                        or params.get("progressToken") != progress_token
                    ):
                        continue
                    progress = params.get("progress")
                    if not isinstance(progress, int | float) or isinstance(progress, bool):
                        continue
                    # progress.mdx: the value MUST increase; drop anything else.
                    if last_progress is not None and progress <= last_progress:
                        continue
                    last_progress = progress
                    await on_progress(params)
                elif message.get("method") == LIST_CHANGED["tools"] and on_list_changed is not None:
                    on_list_changed()  # a legacy server may send it on any reply stream
                # Every other notification (logging, ...) is dropped.
    except SseTooLarge as exc:
        raise UpstreamFault("too_large") from exc
    except SseError as exc:
        raise UpstreamFault("garbled") from exc
    raise UpstreamFault("wrong_id" if saw_other_id else "garbled")
