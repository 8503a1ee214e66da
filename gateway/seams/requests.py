"""One request's state and who watches it: the limiters (``gateway/limits``), the
:class:`RequestContext` the pipeline fills, and the :class:`Observer` that reads it
(``gateway/observability``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.errors import JsonRpcId
from gateway.seams.backends import Era, ToolDef
from gateway.seams.callers import Principal
from gateway.seams.policy import Decision

__all__ = [
    "Asking",
    "CallRecord",
    "ConcurrencyLimiter",
    "Lease",
    "Observer",
    "RateLimiter",
    "RequestContext",
    "sorted_tools",
]

# --- limits ---------------------------------------------------------------------------------


class RateLimiter(Protocol):
    """**Protocol:** a fixed or sliding window limiter (memory or Redis)."""

    async def hit(self, key: str, count: int, per_s: float) -> float | None:
        """Record one event; return None when allowed, else seconds until retry."""
        ...


class Lease(Protocol):
    """**Protocol:** one held concurrency slot."""

    async def release(self) -> None: ...


class ConcurrencyLimiter(Protocol):
    """**Protocol:** counted slots per key (memory, or leases in Redis shared by replicas)."""

    async def acquire(self, key: str, limit: int, hold_s: float) -> Lease | None:
        """Take one of ``limit`` slots of ``key``, or None when all are taken. The slot is held
        until released, and at most ``hold_s`` seconds where it is shared (a replica that dies
        mid-call cannot leak it)."""
        ...


# --- per-request state and observation ------------------------------------------------------


@dataclass(slots=True)
class RequestContext:
    """Everything one MCP request accumulates, for logs, metrics and the audit trail.

    Mutable on purpose: the pipeline fills it as it goes; observers read it once at the end.
    """

    request_id: str
    trace_id: str
    span_id: str
    started: float
    """``time.monotonic()`` at arrival."""
    client_ip: str
    traceparent: str | None = None
    tracestate: str | None = None
    http_method: str = "POST"
    method: str | None = None
    """JSON-RPC method once decoded."""
    jsonrpc_id: JsonRpcId | None = None
    tool: str | None = None
    backend: str | None = None
    """The backend that owns ``tool`` (a bounded name from the configuration), once resolved."""
    era: Era | None = None
    protocol_version: str | None = None
    principal: Principal | None = None
    decision: Decision | None = None
    status: int = 0
    jsonrpc_code: int | None = None
    error_row: str | None = None
    outcome: str | None = None
    """tools/call outcome: ok | tool_error | invalid_arguments | timeout | upstream_error |
    too_large | cancelled | input_required (an input round relayed) | input_refused (one the
    gateway would not relay)."""
    backend_ms: float | None = None
    bytes_in: int = 0
    bytes_out: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    """One record per ``tools/call`` member of a 2025-03-26 batch (the audit trail writes one
    event each); empty for a single request, whose call is described by the fields above."""


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One ``tools/call`` inside a batch: what the audit event of that call needs."""

    tool: str
    decision: Decision | None
    outcome: str
    backend_ms: float | None = None
    backend: str | None = None
    jsonrpc_code: int | None = None
    error_row: str | None = None
    arguments: Mapping[str, Any] | None = None
    exchange: Mapping[str, Any] | None = None
    """The token exchange of this call (``RequestContext.extra["exchange"]``), if any."""
    pdp: Mapping[str, Any] | None = None
    """What the external decision point said of this call (``RequestContext.extra["pdp"]``)."""
    guardrails: Sequence[Mapping[str, Any]] | None = None
    """The verdicts of the rule's processors on this call (``RequestContext.extra
    ["guardrails"]``)."""


class Asking(Protocol):
    """**Protocol:** who asks, in which request, by when: what travels with every question the
    external decision point and the guardrails are asked. The routes' ``Turn`` is one, so no
    value is built per request.
    """

    @property
    def principal(self) -> Principal: ...

    @property
    def ctx(self) -> RequestContext:
        """Where the answer is recorded for the audit trail (``extra``)."""
        ...

    @property
    def deadline(self) -> float:
        """``time.monotonic()`` instant by which the whole request must be answered."""
        ...


class Observer(Protocol):
    """**Protocol:** logs, metrics and audit (``gateway/observability``)."""

    def request_started(self, ctx: RequestContext) -> None: ...

    def request_finished(self, ctx: RequestContext) -> None: ...


def sorted_tools(tools: Sequence[ToolDef]) -> list[ToolDef]:
    return sorted(tools, key=lambda t: t.name)
