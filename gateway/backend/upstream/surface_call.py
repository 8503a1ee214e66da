"""One backend's ``prompts/get``, ``resources/read`` and ``completion/complete`` requests.

Built fresh in the upstream's era like a tool call (:mod:`.tool_call`): a gateway JSON-RPC id,
the gateway's ``_meta`` on a modern upstream (no client capabilities: these requests carry no
input rounds through the gateway), canonical JSON from the params the front door validated,
``Mcp-Name`` for a modern upstream, and only gateway-chosen headers. A configured caller
assertion names the method (``prompts/get``, ...) as what is called.

The reply is read as a :class:`~gateway.seams.SurfaceReply`: a result object, the upstream's
JSON-RPC error code, or a fault kind (no usable answer). An ``input_required`` result is a fault
(``incompatible``): the gateway relays input rounds for ``tools/call`` only.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.backend.credentials.caller_assertion import AssertionSigner
from gateway.backend.credentials.service_credential import ServiceCredential
from gateway.backend.upstream.era import LinkState, modern_meta
from gateway.backend.upstream.link import UpstreamLink
from gateway.backend.upstream.rpc import UpstreamFault
from gateway.backend.upstream.tool_call import gateway_headers, with_trace
from gateway.config import BackendConfig
from gateway.observability import spans
from gateway.observability.logging import get_logger
from gateway.seams import Principal, RequestContext, SurfaceReply, SurfaceRequest, ToolDef

__all__ = ["UpstreamSurfaceCall"]

_log = get_logger("gateway.backend")


class UpstreamSurfaceCall:
    """The prompts/resources/completion requests of one backend."""

    def __init__(
        self,
        link: UpstreamLink,
        settings: BackendConfig,
        *,
        signer: AssertionSigner | None,
        max_bytes: int,
    ) -> None:
        self._link = link
        self._settings = settings
        self._signer = signer
        self._max_bytes = max_bytes

    async def request(
        self,
        request: SurfaceRequest,
        principal: Principal,
        ctx: RequestContext,
        deadline: float,
        *,
        credential: ServiceCredential | None = None,
    ) -> SurfaceReply:
        deadline = min(deadline, time.monotonic() + self._settings.timeout_s)
        # MCP semantic conventions: {method} {prompt name}; a resource URI stays out of the name.
        target = f" {request.name}" if request.method == "prompts/get" and request.name else ""
        with spans.child(request.method + target, kind="client") as span:
            span.set("mcp.method.name", request.method)
            span.set("mcp_gateway.backend", self._settings.name)
            reply = await self._request(
                request, principal, ctx, deadline, credential=credential, span=span
            )
            if reply.fault is not None:
                span.fail(reply.fault)
            elif reply.error_code is not None:
                span.fail(str(reply.error_code))
            return reply

    async def _request(
        self,
        request: SurfaceRequest,
        principal: Principal,
        ctx: RequestContext,
        deadline: float,
        *,
        credential: ServiceCredential | None,
        span: spans.OpenSpan,
    ) -> SurfaceReply:
        headers = gateway_headers(
            self._settings,
            principal,
            ctx,
            traceparent=span.traceparent or request.traceparent,
            tracestate=request.tracestate,
        )
        if self._signer is not None:
            what = ToolDef(name=request.method, definition={}, upstream_name=request.method)
            headers[self._signer.header] = self._signer.assertion(what, principal, ctx)
        params = dict(request.params)

        def prepare(state: LinkState) -> tuple[dict[str, Any], dict[str, str]]:
            body = dict(params)
            if state.era == "modern":
                body["_meta"] = with_trace(modern_meta(), headers)
            return body, headers

        try:
            reply = await self._link.request(
                request.method,
                prepare,
                deadline=deadline,
                name=request.name,
                max_bytes=self._max_bytes,
                credential=credential,
            )
        except UpstreamFault as fault:
            _log.warning(
                "backend_request_failed",
                backend=self._settings.name,
                method=request.method,
                kind=fault.kind,
                status=fault.status,
            )
            return SurfaceReply(fault=fault.kind)
        message = reply.message or {}
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            _log.info(
                "backend_request_error",
                backend=self._settings.name,
                method=request.method,
                code=code if isinstance(code, int) else None,
                status=reply.status,
            )
            if code in (-32020, -32022, -32601):
                self._link.forget()  # the upstream may have changed era; detect again
            return SurfaceReply(
                error_code=code if isinstance(code, int) else None,
                fault=None if isinstance(code, int) else "garbled",
            )
        result = message.get("result")
        if not isinstance(result, dict):
            return SurfaceReply(fault="garbled")
        if result.get("resultType", "complete") != "complete":
            return SurfaceReply(fault="incompatible")
        return SurfaceReply(result=result)
