"""One backend's ``prompts/get``, ``resources/read`` and ``completion/complete`` requests.

Sent as every request but ``tools/call`` is (:mod:`.method_call`): the gateway's ``_meta`` on a
modern upstream (no client capabilities: these requests carry no input rounds through the
gateway), canonical JSON from the params the front door validated, ``Mcp-Name`` for a modern
upstream.

The reply is read as a :class:`~gateway.seams.SurfaceReply`: a result object, the upstream's
JSON-RPC error code, or a fault kind (no usable answer). An ``input_required`` result is a fault
(``incompatible``): the gateway relays input rounds for ``tools/call`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.backend.upstream.era import LinkState, modern_meta
from gateway.backend.upstream.method_call import Exchanged, MethodCall
from gateway.backend.upstream.request_headers import with_trace
from gateway.seams import SurfaceReply, SurfaceRequest

__all__ = ["UpstreamSurfaceCall"]


class UpstreamSurfaceCall(MethodCall[SurfaceRequest, SurfaceReply]):
    """The prompts/resources/completion requests of one backend."""

    def _names(self, request: SurfaceRequest) -> tuple[str, str | None]:
        # MCP semantic conventions: {method} {prompt name}; a resource URI stays out of the name.
        target = f" {request.name}" if request.method == "prompts/get" and request.name else ""
        return request.method + target, request.name

    def _params(
        self, request: SurfaceRequest, state: LinkState, headers: Mapping[str, str]
    ) -> dict[str, Any]:
        body = dict(request.params)
        if state.era == "modern":
            body["_meta"] = with_trace(modern_meta(), headers)
        return body

    def _reply(self, exchanged: Exchanged, request: SurfaceRequest) -> SurfaceReply:
        if exchanged.fault is not None:
            return SurfaceReply(fault=exchanged.fault)
        if exchanged.errored:
            code = exchanged.code
            return SurfaceReply(error_code=code, fault=None if code is not None else "garbled")
        result = exchanged.result
        if result is None:
            return SurfaceReply(fault="garbled")
        if result.get("resultType", "complete") != "complete":
            return SurfaceReply(fault="incompatible")
        return SurfaceReply(result=result)

    def _failure(self, reply: SurfaceReply) -> str | None:
        if reply.fault is not None:
            return reply.fault
        return None if reply.error_code is None else str(reply.error_code)
