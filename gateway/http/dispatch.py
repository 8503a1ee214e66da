"""Pipeline steps 15-18 for one classified message: policy, expiry, dispatch, bounded result.

Per method (MCP 2026-07-28 server/discover.mdx, server/tools.mdx; 2025-06-18 lifecycle.mdx):

- ``server/discover`` and ``tools/list``: the policy's per-method scopes (403 step-up);
  ``tools/list`` shows only the tools the caller may call (tools.mdx §Capabilities: the list MAY
  vary by authorization), or with the policy's ``listing: step_up`` also the ones it could call
  with more scopes; a hidden tool never appears.
- ``tools/call``: a tool the caller may not see is ``unknown_tool`` (no existence leak); one it
  could call with more scopes is ``tool_insufficient_scope`` naming every scope it needs; then
  the per-subject tool rate limit and concurrency cap (429), the expiry re-check, the backend call
  with the request deadline, and the response-size cap (an oversized result becomes a tool error).
- ``initialize`` and ``ping`` (legacy era only): answered by the gateway itself.

Everything returned is a serialized JSON-RPC success body; rejections are raised as
GatewayError rows carrying the message's id and era.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web

from gateway.config import Config
from gateway.deadlines import deadline_at
from gateway.errors import (
    BackendFailure,
    GatewayError,
    InsufficientScope,
    InvalidToken,
    MethodNotFound,
    RateLimited,
    ToolInsufficientScope,
    UnknownTool,
)
from gateway.http.drain import DrainBound
from gateway.http.input_rounds import InputRounds
from gateway.http.progress import ProgressRelay
from gateway.limits.memory import MemoryLeases, retry_after_seconds
from gateway.observability.metrics import Metrics
from gateway.protocol.envelope import error_body, success_body
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import (
    discover_result,
    initialize_result,
    ping_result,
    shape_call_result,
    tool_error_result,
    tools_list_result,
)
from gateway.seams import (
    Backend,
    CallerToken,
    ConcurrencyLimiter,
    Decision,
    InputRequired,
    Lease,
    Policy,
    Principal,
    RateLimiter,
    RequestContext,
    ToolCall,
    ToolDef,
    listed,
)

__all__ = ["OVERSIZE_TEXT", "TIMEOUT_TEXT", "Dispatcher", "Turn"]

OVERSIZE_TEXT: Final = "The tool result exceeded the gateway's response size limit."
"""Fixed text of the tool error that replaces a result larger than ``max_response_bytes``."""
TIMEOUT_TEXT: Final = "The tool did not answer before the request deadline."
"""Fixed text of the tool error when the backend overruns the end-to-end deadline."""
BACKEND_GRACE_S: Final = 0.5
"""Extra time the backend gets past the deadline to turn its own timeout into a tool error."""
CONCURRENCY_RETRY_S: Final = 1
LEASE_MARGIN_S: Final = 1.0
"""A concurrency lease outlives its call's deadline and grace by this much."""
BACKEND_FAILURE_CODE: Final = -32603


@dataclass(slots=True)
class Turn:
    """What one admitted HTTP request carries into dispatch (one policy snapshot)."""

    request: web.Request
    ctx: RequestContext
    policy: Policy
    principal: Principal
    deadline: float
    """``time.monotonic()`` instant by which the whole request must be answered."""
    accepts_sse: bool
    decisions: dict[str, Decision] = field(default_factory=dict)
    caller_token: CallerToken | None = None
    """The caller's token, wrapped; only when a backend exchanges it (``Dispatcher.exchanging``)."""

    def decide(self, tool: str) -> Decision:
        """The policy decision for ``tool``, evaluated once per request."""
        decision = self.decisions.get(tool)
        if decision is None:
            decision = self.policy.decide_tool(self.principal, tool)
            self.decisions[tool] = decision
        return decision


class Dispatcher:
    """Runs one message under a :class:`Turn`; shared by every request of an endpoint."""

    def __init__(
        self,
        *,
        config: Config,
        backend: Backend,
        limiter: RateLimiter,
        leases: ConcurrencyLimiter | None = None,
        metrics: Metrics | None = None,
        drain: DrainBound | None = None,
    ) -> None:
        self._metrics = metrics
        self._drain = drain if drain is not None else DrainBound()
        self._config = config
        self._backend = backend
        self._limiter = limiter
        self._leases: ConcurrencyLimiter = leases if leases is not None else MemoryLeases()
        self._server = config.server
        self._cap = config.limits.max_response_bytes
        # Only the observer reads them, and only to log their shape (keys and types).
        self._log_arguments = config.logging.log_arguments
        self._inputs = InputRounds(config, metrics=metrics)
        self.exchanging = frozenset(
            b.name for b in config.backends if b.credential.type == "token_exchange"
        )
        """Backends whose credential exchanges the caller's token: only their calls carry it."""

    async def enforce_rate(self, key: str, count: int, per_s: float, scope: str) -> None:
        """One event against ``key``'s budget; past it, count ``scope`` and raise 429."""
        wait = await self._limiter.hit(key, count, per_s)
        if wait is not None:
            self.count_limited(scope)
            raise RateLimited(retry_after=retry_after_seconds(wait))

    def count_limited(self, scope: str) -> None:
        if self._metrics is not None:
            self._metrics.rate_limited_total.labels(scope=scope).inc()

    def tool_lookup(self, turn: Turn) -> Callable[[str], ToolDef | None]:
        """The classifier's tool lookup: only tools this caller may see exist."""
        catalog = self._backend.catalog()

        def lookup(name: str) -> ToolDef | None:
            tool = catalog.get(name)
            if tool is None or not turn.decide(name).visible:
                return None
            return tool

        return lookup

    async def run(
        self,
        message: McpMessage,
        turn: Turn,
        *,
        relay: ProgressRelay | None,
        admitted: bool = False,
    ) -> bytes:
        """Serialize the success body for ``message`` or raise its GatewayError row.

        ``relay`` (a ``tools/call`` with a progressToken from a client accepting SSE) is handed
        to the backend as ``ToolCall.on_progress``. ``admitted``: a batch member whose
        HTTP-level checks :meth:`admit_batch` already ran (rate, concurrency, expiry).
        """
        try:
            return await self._run(message, turn, relay, admitted)
        except GatewayError as err:
            if err.request_id is None:
                err.request_id = message.id
            if err.era is None:
                err.era = message.era
            raise

    async def _run(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        method = message.method
        if method == "tools/call":
            return await self._call(message, turn, relay, admitted)
        result: Any
        if method == "tools/list":
            self._method_policy(turn, method)
            catalog = self._backend.catalog()
            listing = turn.policy.listing
            tools = [tool for tool in catalog if listed(turn.decide(tool.name), listing)]
            self._expiry(turn, admitted)
            # caching.mdx: no longer than the configured bound, nor than the catalog is
            # expected to stay as it is (federation: the shortest refresh interval).
            ttl_ms = self._config.protocol.tools_list_ttl_ms
            if catalog.ttl_ms is not None:
                ttl_ms = min(ttl_ms, catalog.ttl_ms)
            result = tools_list_result(
                tools,
                cursor=message.cursor,
                page_size=self._config.protocol.page_size,
                ttl_ms=ttl_ms,
                era=message.era,
                server=self._server,
                request_id=message.id,
            )
        elif method == "server/discover" and message.era == "modern":
            self._method_policy(turn, method)
            self._expiry(turn, admitted)
            result = discover_result(
                server=self._server,
                has_tools=len(self._backend.catalog()) > 0,
                ttl_ms=self._config.protocol.discover_ttl_ms,
                instructions=self._server.instructions,
            )
        elif method == "initialize" and message.era == "legacy":
            self._expiry(turn, admitted)
            requested = message.params.get("protocolVersion")
            result = initialize_result(
                requested if isinstance(requested, str) else message.version,
                server=self._server,
                instructions=self._server.instructions,
            )
        elif method == "ping" and message.era == "legacy":
            self._expiry(turn, admitted)
            result = ping_result()
        else:
            raise MethodNotFound()
        body = success_body(message.id, result)
        if len(body) > self._cap:
            raise BackendFailure(detail="response over max_response_bytes")
        return body

    async def admit_batch(self, messages: tuple[McpMessage, ...], turn: Turn) -> list[Lease]:
        """Every HTTP-level check of a 2025-03-26 batch, before any member runs.

        A batch is answered as a whole when one member needs a step-up (403), is over a rate
        limit or concurrency cap (429) or the token expired (401), so those checks run here for
        every member first: either all of them pass and the members then run without
        re-checking, or nothing runs. Members that fail with a JSON-RPC row (unknown tool or
        method) are left to answer their own error entry. Returns the concurrency leases taken
        (one per distinct capped tool: members run one after another); the caller releases
        them with :meth:`release_leases`.
        """
        catalog = self._backend.catalog()
        calls: list[str] = []
        for message in messages:
            if message.is_notification or message.rejection is not None:
                continue
            if message.method == "tools/call":
                name = message.tool_name or ""
                decision = turn.decide(name)
                tool = catalog.get(name)
                if tool is None or not decision.visible:
                    continue  # answered as its own unknown_tool entry
                if not decision.allowed:
                    turn.ctx.tool, turn.ctx.decision = name, decision
                    turn.ctx.backend = tool.backend or None
                    raise ToolInsufficientScope(
                        scopes=decision.required_scopes, missing=decision.missing_scopes
                    )
                calls.append(name)
            elif message.method == "tools/list" or (
                message.method == "server/discover" and message.era == "modern"
            ):  # the methods with per-method scopes, as in _run
                self._method_policy(turn, message.method)
        self._expiry(turn)
        policy, subject = turn.policy, turn.principal.subject
        for name in calls:
            rate = policy.rate_limit(name)
            if rate is not None:
                await self.enforce_rate(f"tool:{subject}:{name}", rate[0], rate[1], "tool")
        held: list[Lease] = []
        for name in dict.fromkeys(calls):
            limit = policy.max_concurrency(name)
            if limit is None:
                continue
            lease = await self._leases.acquire(f"tool:{subject}:{name}", limit, self._hold_s(turn))
            if lease is None:
                await self.release_leases(held)
                self.count_limited("tool_concurrency")
                raise RateLimited(retry_after=CONCURRENCY_RETRY_S)
            held.append(lease)
        return held

    @staticmethod
    async def release_leases(leases: list[Lease]) -> None:
        for lease in leases:
            await lease.release()

    @staticmethod
    def _hold_s(turn: Turn) -> float:
        # Held at most until the call's deadline (plus grace): a replica that dies mid-call
        # cannot keep a shared slot (state.backend: redis) longer than that.
        return turn.deadline + BACKEND_GRACE_S + LEASE_MARGIN_S - time.monotonic()

    async def _call(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        ctx, principal, policy = turn.ctx, turn.principal, turn.policy
        name = message.tool_name or ""
        ctx.tool = name
        tool = self._backend.catalog().get(name)
        decision = turn.decide(name)
        ctx.decision = decision
        if tool is None or not decision.visible:
            raise UnknownTool()
        ctx.backend = tool.backend or None
        if not decision.allowed:
            raise ToolInsufficientScope(
                scopes=decision.required_scopes, missing=decision.missing_scopes
            )
        key = f"tool:{principal.subject}:{name}"
        lease = None
        if not admitted:
            rate = policy.rate_limit(name)
            if rate is not None:
                await self.enforce_rate(key, rate[0], rate[1], "tool")
            limit = policy.max_concurrency(name)
            if limit is not None:
                lease = await self._leases.acquire(key, limit, self._hold_s(turn))
                if lease is None:
                    self.count_limited("tool_concurrency")
                    raise RateLimited(retry_after=CONCURRENCY_RETRY_S)
        if self._log_arguments:
            ctx.extra["arguments"] = message.arguments or {}
        try:
            if not admitted:
                self._expiry(turn)
            # A retry of an input round: checked now, before anything goes upstream.
            resume = (
                self._inputs.resume(message, principal, policy.version, ctx, backend=tool.backend)
                if message.era == "modern"
                else None
            )
            call = ToolCall(
                tool=tool,
                arguments=message.arguments or {},
                era=message.era,
                protocol_version=message.version,
                progress_token=message.progress_token,
                accepts_sse=turn.accepts_sse,
                header_params=message.header_params or {},
                traceparent=ctx.traceparent,
                tracestate=ctx.tracestate,
                on_progress=relay,
                client_capabilities=(
                    message.client_capabilities if message.era == "modern" else {}
                ),
                resume=resume,
                caller_token=turn.caller_token if tool.backend in self.exchanging else None,
            )
            began = time.monotonic()
            drain = self._drain
            try:
                with deadline_at(drain.bound(turn.deadline + BACKEND_GRACE_S)) as timer:
                    drain.watch(timer)
                    try:
                        raw = await self._backend.call_tool(call, principal, ctx, turn.deadline)
                    finally:
                        drain.unwatch(timer)
            except TimeoutError:
                raw = tool_error_result(TIMEOUT_TEXT)
                ctx.outcome = "timeout"
            finally:
                ctx.backend_ms = (time.monotonic() - began) * 1000.0
        finally:
            if lease is not None:
                await lease.release()
        if isinstance(raw, InputRequired):  # the upstream asks the user: seal and relay
            shaped = self._inputs.relay(
                raw, message, principal=principal, policy_version=policy.version,
                resume=resume, ctx=ctx,
            )  # fmt: skip
        else:
            if ctx.outcome is None:
                ctx.outcome = "tool_error" if raw.get("isError") is True else "ok"
            shaped = shape_call_result(raw, era=message.era, server=self._server)
        body = success_body(message.id, shaped)
        if len(body) > self._cap:
            ctx.outcome = "too_large"
            body = self.over_budget(message)
        return body

    def over_budget(self, message: McpMessage) -> bytes:
        """The stand-in for a result that does not fit the response budget."""
        if message.method == "tools/call":
            shaped = shape_call_result(
                tool_error_result(OVERSIZE_TEXT), era=message.era, server=self._server
            )
            return success_body(message.id, shaped)
        return self.failure_body(message)

    @staticmethod
    def failure_body(message: McpMessage) -> bytes:
        """The smallest answer to ``message``: a ``backend_failure`` (-32603) error entry."""
        return error_body(message.id, BACKEND_FAILURE_CODE, BackendFailure.message, None)

    @staticmethod
    def _method_policy(turn: Turn, method: str) -> None:
        decision = turn.policy.decide_method(turn.principal, method)
        turn.ctx.decision = decision
        if not decision.allowed:
            raise InsufficientScope(
                scopes=decision.required_scopes, missing=decision.missing_scopes
            )

    @staticmethod
    def _expiry(turn: Turn, admitted: bool = False) -> None:
        # Step 16: a token that expired while the request waited is refused before dispatch.
        # A batch member was checked once before the first member ran (admit_batch).
        if not admitted and turn.principal.expired():
            raise InvalidToken()
