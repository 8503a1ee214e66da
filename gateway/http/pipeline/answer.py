"""Pipeline steps 15-18 of docs/architecture.md: dispatch a decoded request and answer it.

Split from :mod:`gateway.http.pipeline.endpoint`, which admits the request (steps 2-14) and records
it; what happens once it is decoded and classified is here: a single message is dispatched and
answered with a bounded ``application/json`` body, or an SSE stream once a tool reports progress; a
JSON-RPC batch (2025-03-26 only) runs its members within one response budget. Plain functions called
once per request, in place of the endpoint methods they were (no extra call on the hot path).
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

from gateway.errors import GatewayError
from gateway.http.error_response import internal_error
from gateway.http.pipeline.dispatch import Dispatcher
from gateway.http.progress import ProgressRelay
from gateway.http.subscriptions.legacy_sessions import SESSION_HEADER
from gateway.http.turn import Turn
from gateway.protocol.envelope import error_body
from gateway.protocol.messages import McpMessage
from gateway.seams import CallRecord, RequestContext

__all__ = ["EMPTY_HEADERS", "JSON_HEADERS", "answer_batch", "answer_single"]

JSON_HEADERS: Final = {"Content-Type": "application/json", "Cache-Control": "no-store"}
EMPTY_HEADERS: Final = {"Cache-Control": "no-store"}


async def answer_single(
    dispatcher: Dispatcher, message: McpMessage, turn: Turn
) -> web.StreamResponse:
    """Steps 15-18 for one message: dispatch it, answer JSON (or SSE once it reports progress)."""
    ctx = turn.ctx
    ctx.era = message.era
    ctx.protocol_version = message.version
    ctx.method = message.method
    ctx.jsonrpc_id = message.id
    ctx.tool = message.tool_name
    if message.era == "legacy":
        dispatcher.sessions.refuse_ended(turn.request.headers.get(SESSION_HEADER), message.id)
    if message.is_notification:
        # streamable-http.mdx: an accepted notification is 202 with no body; dropped.
        return web.Response(status=202, headers=EMPTY_HEADERS)
    # One string compare on every other request (tools/call's hot path): only a listen streams.
    found = dispatcher.route(message) if message.method == "subscriptions/listen" else None
    if found is not None and found.stream is not None:
        try:
            return await found.stream(message, turn)  # writes its own SSE response
        except GatewayError as refused:
            if refused.request_id is None:
                refused.request_id = message.id
            refused.era = refused.era or message.era
            raise
    relay = None
    if turn.accepts_sse and message.progress_token is not None:
        relay = ProgressRelay(turn.request)  # commits to SSE only on the first progress
    try:
        body = await dispatcher.run(message, turn, relay=relay)
    except Exception as exc:
        if relay is None or not relay.streaming:
            raise
        # Status 200 is already on the wire: the error becomes the stream's last event, with
        # the code a batch member raising it mid-batch would get (a guardrail refusing the
        # result: -31403 and its data).
        err = exc if isinstance(exc, GatewayError) else internal_error(exc)
        code = err.jsonrpc_code or err.batch_member_code
        if code is None:
            err = internal_error(exc)
            code = err.jsonrpc_code or -32603
        ctx.jsonrpc_code, ctx.error_row = code, err.row
        body = error_body(message.id, code, err.body_message(), err.body_data())
    ctx.bytes_out = len(body)
    if relay is not None and relay.streaming:
        response = await relay.finish(body)
        ctx.bytes_out = relay.bytes_out
        ctx.status = 200
        return response
    extra = turn.response_headers
    headers = JSON_HEADERS if extra is None else {**JSON_HEADERS, **extra}
    return web.Response(status=200, body=body, headers=headers)


async def answer_batch(
    dispatcher: Dispatcher,
    messages: tuple[McpMessage, ...],
    turn: Turn,
    max_response_bytes: int,
) -> web.StreamResponse:
    """2025-03-26 basic/index.mdx §Batching: one JSON array, one response budget.

    Notifications produce no entry; an all-notification batch is 202. HTTP-level rows (403
    step-up, 429, 401) answer the whole batch and are checked for every member before any
    member runs (``Dispatcher.admit_batch``): a batch either runs or does nothing. JSON-RPC
    rows become error entries. Each ``tools/call`` member leaves one record in
    ``ctx.calls`` (one audit event each).
    """
    ctx = turn.ctx
    first = messages[0]
    ctx.era, ctx.protocol_version, ctx.method = first.era, first.version, "batch"
    dispatcher.sessions.refuse_ended(turn.request.headers.get(SESSION_HEADER), None)
    requests = [message for message in messages if not message.is_notification]
    held = await dispatcher.admit_batch(messages, turn)
    try:
        parts = await _run_batch(dispatcher, requests, turn, max_response_bytes)
    finally:
        await dispatcher.release_leases(held)
    if not parts:
        return web.Response(status=202, headers=EMPTY_HEADERS)
    out = b"[" + b",".join(parts) + b"]"
    ctx.bytes_out = len(out)
    return web.Response(status=200, body=out, headers=JSON_HEADERS)


async def _run_batch(
    dispatcher: Dispatcher, requests: list[McpMessage], turn: Turn, max_response_bytes: int
) -> list[bytes]:
    ctx = turn.ctx
    # Each pending entry keeps room for its smallest possible answer (a -32603 error), so
    # the array never exceeds the budget however large the earlier results were.
    floors = [len(dispatcher.failure_body(message)) + 1 for message in requests]
    reserved = sum(floors)
    room = max_response_bytes - 2  # the brackets
    parts: list[bytes] = []
    for message, floor in zip(requests, floors, strict=True):
        reserved -= floor
        is_call = message.method == "tools/call"
        if is_call:
            ctx.decision, ctx.outcome, ctx.backend_ms = None, None, None
            ctx.backend = None
            ctx.extra.pop("arguments", None)
        error: GatewayError | None = None
        try:
            if message.rejection is not None:
                raise message.rejection
            body = await dispatcher.run(message, turn, relay=None, admitted=True)
        except GatewayError as err:
            error = err
            if err.jsonrpc_code is not None:
                body = error_body(message.id, err.jsonrpc_code, err.message, None)
            elif err.batch_member_code is not None:
                # Raised while this member ran: the earlier members' results stand.
                body = error_body(
                    message.id, err.batch_member_code, err.body_message(), err.body_data()
                )
            else:
                err.request_id = None  # it answers the whole batch, not this member
                raise
        fits = room - reserved
        if len(body) + 1 > fits:
            body = dispatcher.over_budget(message)
            if len(body) + 1 > fits:
                body = dispatcher.failure_body(message)
        room -= len(body) + 1
        parts.append(body)
        if is_call:
            ctx.calls.append(_call_record(message, ctx, error))
    return parts


def _call_record(
    message: McpMessage, ctx: RequestContext, error: GatewayError | None
) -> CallRecord:
    arguments = ctx.extra.get("arguments")
    exchange = ctx.extra.pop("exchange", None)  # this member's own, never the previous one's
    pdp = ctx.extra.pop("pdp", None)
    guardrails = ctx.extra.pop("guardrails", None)
    return CallRecord(
        tool=message.tool_name or "",
        decision=ctx.decision,
        outcome=ctx.outcome or ("rejected" if error is not None else "ok"),
        backend_ms=ctx.backend_ms,
        backend=ctx.backend,
        jsonrpc_code=None if error is None else (error.jsonrpc_code or error.batch_member_code),
        error_row=None if error is None else error.row,
        arguments=arguments if isinstance(arguments, dict) else None,
        exchange=exchange if isinstance(exchange, dict) else None,
        pdp=pdp if isinstance(pdp, dict) else None,
        guardrails=guardrails if isinstance(guardrails, list) else None,
    )
