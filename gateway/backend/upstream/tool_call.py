"""One backend's upstream ``tools/call``: the request in the upstream's era, the reply read back.

MCP 2026-07-28 server/tools.mdx §Calling Tools, client side. :meth:`UpstreamToolCall.call`
builds a fresh request (gateway JSON-RPC id and progress token, gateway ``_meta`` with the
client's known capabilities, canonical JSON, only gateway-chosen headers: :meth:`headers`) under
the tool's own timeout, and reads the reply as a tool result: every upstream fault is an
``isError`` result with a fixed text (:mod:`.tool_results`), except a modern ``-32021`` for a modern
client, which is relayed; an ``input_required`` result is checked and returned as such.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from typing import Any

from gateway.backend.credentials.caller_assertion import AssertionSigner
from gateway.backend.credentials.service_credential import ServiceCredential
from gateway.backend.upstream.era import LinkState, modern_meta
from gateway.backend.upstream.link import UpstreamLink
from gateway.backend.upstream.request_headers import gateway_headers, with_trace
from gateway.backend.upstream.rpc import ProgressSink, Reply, UpstreamFault
from gateway.backend.upstream.tool_headers import param_values
from gateway.backend.upstream.tool_results import (
    CAPABILITY_TEXT,
    FAILED_TEXT,
    MISSING_CAPABILITY_CODE,
    REJECTED_TEXT,
    TASKS_WITHHELD_TEXT,
    failed_call,
    fault_outcome,
    fault_text,
    input_required,
    missing_capability_data,
    sanitize_result,
)
from gateway.config import BackendConfig
from gateway.errors import MissingClientCapability
from gateway.observability import spans
from gateway.observability.logging import get_logger
from gateway.observability.metric_labels import BackendOutcome
from gateway.outbound.client import server_of
from gateway.protocol.capabilities import known_capabilities
from gateway.protocol.input_required import InvalidInputRequired
from gateway.protocol.results import tool_error_result
from gateway.protocol.tasks_extension import (
    TASK_KEY,
    InvalidTask,
    declares_tasks,
    parse_task,
    requires_tasks,
    without_tasks,
)
from gateway.seams import (
    Era,
    InputRequired,
    Principal,
    RequestContext,
    Resume,
    TaskCreated,
    ToolCall,
)

__all__ = ["Answer", "UpstreamToolCall"]

_log = get_logger("gateway.backend")

Answer = tuple[dict[str, Any] | InputRequired | TaskCreated, BackendOutcome]
"""A call's result for the client and its ``backend_requests_total`` outcome."""


class UpstreamToolCall:
    """The ``tools/call`` requests of one backend (see the module docstring)."""

    def __init__(
        self,
        link: UpstreamLink,
        settings: BackendConfig,
        *,
        signer: AssertionSigner | None,
        max_state_bytes: int,
        on_stale_catalog: Callable[[], None],
    ) -> None:
        """``on_stale_catalog``: the upstream refused a tool or its arguments (-32602)."""
        self._link = link
        self._settings = settings
        self._backend = settings.name
        self._signer = signer
        self._max_state_bytes = max_state_bytes
        self._on_stale_catalog = on_stale_catalog
        self._progress_ids = itertools.count(1)
        self._address = server_of(settings.url)

    async def call(
        self,
        call: ToolCall,
        arguments: dict[str, Any],
        principal: Principal,
        ctx: RequestContext,
        deadline: float,
        *,
        credential: ServiceCredential | None = None,
    ) -> Answer:
        """Send the call (``arguments``: already validated) and read its reply."""
        tool = call.tool
        deadline = min(deadline, time.monotonic() + self._settings.tool_timeout(tool.name))
        token, relay = self._progress(call)
        upstream_name = tool.upstream_name or tool.name
        # The backend call's CLIENT span in a traced request (MCP semantic conventions: the
        # client side of tools/call); the backend's traceparent names this span as its parent.
        with spans.child(f"tools/call {upstream_name}", kind="client") as span:
            if span is not spans.NO_SPAN:
                self._describe(span, upstream_name)
            headers = self.headers(call, principal, ctx, traceparent=span.traceparent)
            request = _Request(call, arguments, headers, token)
            try:
                reply = await self._link.request(
                    "tools/call",
                    request,
                    deadline=deadline,
                    name=request.upstream_name,
                    progress_token=token,
                    on_progress=relay,
                    credential=credential,
                )
            except UpstreamFault as fault:
                _log.warning(
                    "backend_call_failed",
                    backend=self._backend,
                    tool=tool.name,
                    kind=fault.kind,
                    status=fault.status,
                )
                span.fail(fault.kind)
                if fault.status is not None:
                    span.set("http.response.status_code", fault.status)
                return tool_error_result(fault_text(fault.kind)), fault_outcome(fault.kind)
            span.set("http.response.status_code", reply.status)
            message = reply.message or {}
            error = message.get("error")
            if isinstance(error, dict):
                span.fail(str(error.get("code")))
                return self._error_answer(error, reply, call, request)
            answer = self._result_answer(message.get("result") or {}, call, request, ctx)
            if answer[1] not in ("ok", "input_required", "task"):
                span.fail(answer[1])  # tool_error (isError: true), or the result's fault
            return answer

    def _describe(self, span: spans.OpenSpan, upstream_name: str) -> None:
        span.set("mcp.method.name", "tools/call")
        span.set("gen_ai.tool.name", upstream_name)
        span.set("gen_ai.operation.name", "execute_tool")
        span.set("mcp_gateway.backend", self._backend)
        span.set("server.address", self._address[0])
        span.set("server.port", self._address[1])
        span.set("network.transport", "tcp")

    def _progress(self, call: ToolCall) -> tuple[str | None, ProgressSink | None]:
        """Our own progress token upstream, and the relay that rewrites it back to the client's."""
        if call.progress_token is None or call.on_progress is None:
            return None, None
        client_token = call.progress_token
        sink = call.on_progress

        async def relay(params: Mapping[str, Any]) -> None:
            await sink({**params, "progressToken": client_token})

        return f"gw-progress-{next(self._progress_ids)}", relay

    def headers(
        self,
        call: ToolCall,
        principal: Principal,
        ctx: RequestContext,
        *,
        traceparent: str | None = None,
    ) -> dict[str, str]:
        """The only non-protocol headers the upstream sees, all chosen by the gateway.

        ``traceparent``: the backend call's own span as the parent (a traced request), else
        the request's (the gateway's server span id, as without tracing)."""
        return gateway_headers(
            self._settings,
            principal,
            ctx,
            (traceparent or call.traceparent, call.tracestate),
            signer=self._signer,
            called=call.tool,
        )

    def _error_answer(
        self, error: Mapping[str, Any], reply: Reply, call: ToolCall, request: _Request
    ) -> Answer:
        """A JSON-RPC error from the upstream: a fixed tool error, or a relayed -32021."""
        code = error.get("code")
        _log.warning(
            "backend_call_error",
            backend=self._backend,
            tool=call.tool.name,
            code=code,
            status=reply.status,
        )
        if code == -32602:
            # Unknown tool or arguments the upstream refuses: the catalog may be stale.
            self._on_stale_catalog()
            return tool_error_result(REJECTED_TEXT), "upstream_error"
        if code == MISSING_CAPABILITY_CODE and request.era == "modern":
            # basic/index.mdx: -32021 reaches the client as itself (HTTP 400), not as a
            # tool result; a legacy client could not re-declare, so it gets a tool error.
            if call.era != "modern":
                return tool_error_result(CAPABILITY_TEXT), "upstream_error"
            data = missing_capability_data(error)
            if (
                requires_tasks(data["requiredCapabilities"])
                and not request.sent_tasks
                and (declares_tasks(call.client_capabilities))
            ):
                # The client has the extension; the gateway withheld it (policy, or tasks off):
                # declaring it again would not help.
                return tool_error_result(TASKS_WITHHELD_TEXT), "upstream_error"
            raise MissingClientCapability(data=data)
        if code in (-32020, -32022, -32601):
            self._link.forget()  # the upstream changed era; detect again
        return tool_error_result(FAILED_TEXT), "upstream_error"

    def _result_answer(
        self, raw: Any, call: ToolCall, request: _Request, ctx: RequestContext
    ) -> Answer:
        """A result: an ``input_required`` round checked, a task the call could become, else
        the sanitized CallToolResult."""
        if isinstance(raw, dict) and raw.get("resultType") == "task":
            return self._task_answer(raw, call, request, ctx)
        if isinstance(raw, dict) and raw.get("resultType") == "input_required":
            try:
                found = input_required(
                    raw, backend=self._backend, max_state_bytes=self._max_state_bytes
                )
            except InvalidInputRequired as bad:
                return failed_call(
                    self._backend, call.tool.name, "bad_input_required", reason=bad.reason
                )
            return found, "input_required"
        result = sanitize_result(raw)
        if result is None:
            return failed_call(self._backend, call.tool.name, "bad_result")
        return result, ("tool_error" if result.get("isError") is True else "ok")

    def _task_answer(
        self, raw: Mapping[str, Any], call: ToolCall, request: _Request, ctx: RequestContext
    ) -> Answer:
        """A ``CreateTaskResult``: checked when the extension was sent with the call; without
        it the upstream broke the extension's MUST NOT (a task to a client that did not declare
        the extension on that request), which is an upstream error like any garbled reply."""
        if not request.sent_tasks:
            ctx.extra[TASK_KEY] = {"refused": "unsolicited"}
            return failed_call(self._backend, call.tool.name, "unsolicited_task")
        try:
            task = parse_task(raw, detailed=False)
        except InvalidTask as bad:
            return failed_call(self._backend, call.tool.name, "bad_task", reason=str(bad))
        return TaskCreated(self._backend, task), "task"


class _Request:
    """The link's ``prepare``: the call's params and headers in the era the link found."""

    __slots__ = (
        "_arguments",
        "_call",
        "_capabilities",
        "_headers",
        "_token",
        "era",
        "sent_tasks",
        "upstream_name",
    )

    def __init__(
        self,
        call: ToolCall,
        arguments: dict[str, Any],
        headers: dict[str, str],
        progress_token: str | None,
    ) -> None:
        self._call = call
        self._arguments = arguments
        self._headers = headers
        self._token = progress_token
        # The client's own declaration, so the upstream does not refuse a capability it has.
        self._capabilities = known_capabilities(call.client_capabilities)
        self.upstream_name = call.tool.upstream_name or call.tool.name
        self.era: Era | None = None
        """The era of the last attempt (the link may re-detect between attempts)."""
        self.sent_tasks = False
        """The last attempt declared the tasks extension upstream (the call may be a task)."""

    def __call__(self, state: LinkState) -> tuple[dict[str, Any], dict[str, str]]:
        self.era = state.era
        call = self._call
        params: dict[str, Any] = {"name": self.upstream_name, "arguments": self._arguments}
        headers = dict(self._headers)
        # The extension only where the call may become a task and the upstream offers it.
        self.sent_tasks = call.tasks and state.era == "modern" and state.tasks
        if state.era == "modern":
            capabilities = (
                self._capabilities if self.sent_tasks else without_tasks(self._capabilities)
            )
            params["_meta"] = with_trace(modern_meta(self._token, capabilities), headers)
            params.update(_resume_params(call.resume))
            # The backend's own x-mcp-header parameters (a fixed argument's too).
            own = call.tool.origin or call.tool
            headers.update(param_values(own.header_params, self._arguments))
        elif call.resume is not None:
            raise UpstreamFault("incompatible")  # a legacy upstream cannot take the retry
        elif self._token is not None:
            params["_meta"] = {"progressToken": self._token}
        return params, headers


def _resume_params(resume: Resume | None) -> dict[str, Any]:
    """The retry members upstream: its own ``requestState``, the checked ``inputResponses``."""
    params: dict[str, Any] = {}
    if resume is not None:
        if resume.responses is not None:
            params["inputResponses"] = dict(resume.responses)
        if resume.state is not None:
            params["requestState"] = resume.state
    return params
