"""What a backend's requests other than ``tools/call`` share: the prompts/resources/completion
requests (:mod:`.surface_call`) and the tasks extension's (:mod:`.task_call`).

Each is built fresh in the upstream's era like a tool call (:mod:`.tool_call`): a gateway
JSON-RPC id, only gateway-chosen headers (a configured caller assertion names the method,
``prompts/get``, ``tasks/get``, ..., as what is called), under the backend's timeout, in a
CLIENT span named by the MCP semantic conventions. :class:`MethodCall` sends it and reads the
reply as far as every method reads it alike (:class:`Exchanged`); the subclass builds the params
for the era the link found and makes its own reply of the rest.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from gateway.backend.credentials.caller_assertion import AssertionSigner
from gateway.backend.credentials.service_credential import ServiceCredential
from gateway.backend.upstream.era import LinkState
from gateway.backend.upstream.link import Prepare, UpstreamLink
from gateway.backend.upstream.request_headers import gateway_headers
from gateway.backend.upstream.rpc import FaultKind, UpstreamFault
from gateway.config import BackendConfig
from gateway.observability import spans
from gateway.observability.logging import get_logger
from gateway.seams import Principal, RequestContext, ToolDef

__all__ = ["Exchanged", "MethodCall"]

_log = get_logger("gateway.backend")

_ERA_CODES = (-32020, -32022, -32601)
"""Errors after which the upstream may have changed era: the link detects it again."""


class _Request(Protocol):
    @property
    def method(self) -> str: ...
    @property
    def traceparent(self) -> str | None: ...
    @property
    def tracestate(self) -> str | None: ...


_Req = TypeVar("_Req", bound=_Request)
_Reply = TypeVar("_Reply")


@dataclass(frozen=True, slots=True)
class Exchanged:
    """A reply as every method reads it: a fault, a JSON-RPC error, or a result member."""

    fault: FaultKind | None = None
    """No usable answer (the link's fault)."""
    errored: bool = False
    """The upstream answered with a JSON-RPC error; :attr:`code` is its code if an integer."""
    code: int | None = None
    result: dict[str, Any] | None = None
    """The result member when it is an object (any ``resultType``); None when it is not."""


class MethodCall(Generic[_Req, _Reply]):
    """One backend's requests of one kind: :meth:`request` is the whole exchange; a subclass
    names it (:meth:`_names`), builds its params (:meth:`_params`) and reads the reply
    (:meth:`_reply`, :meth:`_failure`)."""

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
        request: _Req,
        principal: Principal,
        ctx: RequestContext,
        deadline: float,
        *,
        credential: ServiceCredential | None = None,
    ) -> _Reply:
        deadline = min(deadline, time.monotonic() + self._settings.timeout_s)
        span_name, mcp_name = self._names(request)
        with spans.child(span_name, kind="client") as span:
            span.set("mcp.method.name", request.method)
            span.set("mcp_gateway.backend", self._settings.name)
            headers = self._headers(request, principal, ctx, span.traceparent)

            def prepare(state: LinkState) -> tuple[dict[str, Any], dict[str, str]]:
                return self._params(request, state, headers), headers

            exchanged = await self._exchange(
                request.method, prepare, deadline, mcp_name, credential
            )
            reply = self._reply(exchanged, request)
            failure = self._failure(reply)
            if failure is not None:
                span.fail(failure)
            return reply

    def _names(self, request: _Req) -> tuple[str, str | None]:
        """The span's name and the ``Mcp-Name`` value."""
        raise NotImplementedError

    def _params(
        self, request: _Req, state: LinkState, headers: Mapping[str, str]
    ) -> dict[str, Any]:
        """The params in the era the link found (raise ``UpstreamFault`` where none fits)."""
        raise NotImplementedError

    def _reply(self, exchanged: Exchanged, request: _Req) -> _Reply:
        raise NotImplementedError

    def _failure(self, reply: _Reply) -> str | None:
        """What the span is failed with (None: it succeeded)."""
        raise NotImplementedError

    def _headers(
        self,
        request: _Req,
        principal: Principal,
        ctx: RequestContext,
        traceparent: str | None,
    ) -> dict[str, str]:
        return gateway_headers(
            self._settings,
            principal,
            ctx,
            (traceparent or request.traceparent, request.tracestate),
            signer=self._signer,
            called=_called(request.method),
        )

    async def _exchange(
        self,
        method: str,
        prepare: Prepare,
        deadline: float,
        name: str | None,
        credential: ServiceCredential | None,
    ) -> Exchanged:
        try:
            reply = await self._link.request(
                method,
                prepare,
                deadline=deadline,
                name=name,
                max_bytes=self._max_bytes,
                credential=credential,
            )
        except UpstreamFault as fault:
            _log.warning(
                "backend_request_failed",
                backend=self._settings.name,
                method=method,
                kind=fault.kind,
                status=fault.status,
            )
            return Exchanged(fault=fault.kind)
        message = reply.message or {}
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            known = code if isinstance(code, int) else None
            _log.info(
                "backend_request_error",
                backend=self._settings.name,
                method=method,
                code=known,
                status=reply.status,
            )
            if code in _ERA_CODES:
                self._link.forget()  # the upstream may have changed era; detect again
            return Exchanged(errored=True, code=known)
        result = message.get("result")
        return Exchanged(result=result if isinstance(result, dict) else None)


@functools.lru_cache(maxsize=32)  # the gateway's own method names: a handful
def _called(method: str) -> ToolDef:
    """What a method request names as called (the caller assertion): one per method, not one
    per request."""
    return ToolDef(name=method, definition={}, upstream_name=method)
