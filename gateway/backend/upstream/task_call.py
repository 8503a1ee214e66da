"""One backend's ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` (the tasks extension).

Built fresh like every upstream request (:mod:`.tool_call`, :mod:`.surface_call`): a gateway
JSON-RPC id, the gateway's ``_meta`` with the client's known capabilities (the extension among
them: a backend MUST refuse a task request that does not declare it), canonical JSON of
``taskId`` (the backend's own id, restored from the handle) and, for ``tasks/update``, the
checked ``inputResponses``; ``Mcp-Name`` is the restored id too (SEP-2663 §Streamable HTTP:
Routing Headers), so the client's handle never reaches the backend. Only a 2026-07-28 upstream
takes them: the extension does not exist on the legacy revisions.

The reply is read as a :class:`~gateway.seams.TaskReply`: ``tasks/get`` a checked task
(:func:`gateway.protocol.tasks_extension.parse_task`; a completed task's ``result`` checked as a
tool result), ``tasks/update`` / ``tasks/cancel`` an acknowledgement, ``-32602`` the backend does
not know the task, anything else a fault.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from gateway.backend.credentials.caller_assertion import AssertionSigner
from gateway.backend.credentials.service_credential import ServiceCredential
from gateway.backend.upstream.era import LinkState, modern_meta
from gateway.backend.upstream.link import UpstreamLink
from gateway.backend.upstream.rpc import UpstreamFault
from gateway.backend.upstream.tool_call import gateway_headers, with_trace
from gateway.backend.upstream.tool_results import sanitize_result
from gateway.config import BackendConfig
from gateway.observability import spans
from gateway.observability.logging import get_logger
from gateway.protocol.capabilities import known_capabilities
from gateway.protocol.tasks_extension import InvalidTask, parse_task
from gateway.seams import Principal, RequestContext, Task, TaskReply, TaskRequest, ToolDef

__all__ = ["UNKNOWN_TASK_CODE", "UpstreamTaskCall", "checked_task"]

UNKNOWN_TASK_CODE = -32602
"""SEP-2663 §Error Handling: an invalid or nonexistent ``taskId`` is ``-32602``."""

_log = get_logger("gateway.backend")


class UpstreamTaskCall:
    """The task requests of one backend."""

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
        request: TaskRequest,
        principal: Principal,
        ctx: RequestContext,
        deadline: float,
        *,
        credential: ServiceCredential | None = None,
    ) -> TaskReply:
        deadline = min(deadline, time.monotonic() + self._settings.timeout_s)
        with spans.child(request.method, kind="client") as span:
            span.set("mcp.method.name", request.method)
            span.set("mcp_gateway.backend", self._settings.name)
            reply = await self._request(
                request, principal, ctx, deadline, credential=credential, span=span
            )
            if reply.fault is not None:
                span.fail(reply.fault)
            elif reply.unknown:
                span.fail(str(UNKNOWN_TASK_CODE))
            return reply

    async def _request(
        self,
        request: TaskRequest,
        principal: Principal,
        ctx: RequestContext,
        deadline: float,
        *,
        credential: ServiceCredential | None,
        span: spans.OpenSpan,
    ) -> TaskReply:
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
        params: dict[str, Any] = {"taskId": request.task_id}
        if request.input_responses is not None:
            params["inputResponses"] = dict(request.input_responses)
        capabilities = known_capabilities(request.client_capabilities or {})

        def prepare(state: LinkState) -> tuple[dict[str, Any], dict[str, str]]:
            if state.era != "modern":
                raise UpstreamFault("incompatible")  # no tasks before 2026-07-28
            body = dict(params)
            body["_meta"] = with_trace(modern_meta(capabilities=capabilities), headers)
            return body, headers

        try:
            reply = await self._link.request(
                request.method,
                prepare,
                deadline=deadline,
                name=request.task_id,
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
            return TaskReply(fault=fault.kind)
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
            if code == UNKNOWN_TASK_CODE:
                return TaskReply(unknown=True)
            if code in (-32020, -32022, -32601):
                self._link.forget()  # the upstream may have changed era; detect again
            return TaskReply(fault="upstream_error")
        result = message.get("result")
        if not isinstance(result, dict) or result.get("resultType", "complete") != "complete":
            return TaskReply(fault="garbled")
        if request.method != "tasks/get":
            return TaskReply(acknowledged=True)
        return self._task(result, request)

    def _task(self, result: dict[str, Any], request: TaskRequest) -> TaskReply:
        try:
            task = checked_task(result)
            if task.task_id != request.task_id:
                raise InvalidTask("another task's id")
        except InvalidTask as bad:
            _log.warning(
                "backend_request_failed",
                backend=self._settings.name,
                method=request.method,
                kind="bad_task",
                reason=str(bad),
            )
            return TaskReply(fault="garbled")
        return TaskReply(task=task)


def checked_task(raw: Any) -> Task:
    """A backend's ``DetailedTask`` (a ``tasks/get`` result, or the params of a
    ``notifications/tasks``) checked (:func:`~gateway.protocol.tasks_extension.parse_task`), a
    completed task's ``result`` as a tool result; raises
    :class:`~gateway.protocol.tasks_extension.InvalidTask`."""
    task = parse_task(raw, detailed=True)
    if task.result is not None:
        checked = sanitize_result(task.result)
        if checked is None:
            raise InvalidTask("completed task's result is not a tool result")
        task = replace(task, result=checked)
    return task
