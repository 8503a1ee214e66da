"""An audit event as the gateway records one, for the audit sink and chain tests."""

from __future__ import annotations

from gateway.observability.audit import AuditEvent

__all__ = ["audit_event"]


def audit_event(n: int, tool: str = "search_docs") -> AuditEvent:
    """The ``n``-th allowed, answered call of ``tool`` by alice (request id ``req-000n``)."""
    return AuditEvent(
        request_id=f"req-{n:04d}",
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        subject="alice@example.com",
        client_id="claude-code",
        tool=tool,
        decision="allow",
        rule="search_docs",
        missing_scopes=(),
        outcome="ok",
        duration_ms=1.5,
        backend_ms=1.0,
        status=200,
    )
