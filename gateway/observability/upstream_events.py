"""What per-user upstream authorization writes to the audit trail, the log and the metrics.

One :class:`UpstreamEvent` per consent link handed out (``upstream_consent_started``), account
connected (``upstream_consent_completed``), connection that failed (``upstream_consent_failed``:
declined, refused, a mix-up, another person), token refreshed (``upstream_token_refreshed``) or
not (``upstream_refresh_failed``), account disconnected by its person
(``upstream_disconnected``) and records purged by an operator (``upstream_tokens_purged``).
An event names the person by issuer and subject (as ``logging.subject`` says: plain or a
fingerprint), the backend, and the upstream authorization server; never a token, a code, a
state, a verifier or a link's nonce. Counted in ``mcp_gateway_upstream_consents_total`` and
``mcp_gateway_upstream_refreshes_total``, logged as ``upstream.<event>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

from gateway.observability.event_trail import EventTrail, sparse_line
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics

__all__ = ["UpstreamAudit", "UpstreamEvent"]

EventName = Literal[
    "upstream_consent_started",
    "upstream_consent_completed",
    "upstream_consent_failed",
    "upstream_token_refreshed",
    "upstream_refresh_failed",
    "upstream_disconnected",
    "upstream_tokens_purged",
]
_CONSENT: Final = {
    name: name.removeprefix("upstream_consent_")
    for name in get_args(EventName)
    if name.startswith("upstream_consent_")
}
_log = get_logger("gateway.upstream")


@dataclass(frozen=True, slots=True)
class UpstreamEvent:
    """One audit event of per-user upstream authorization (module docstring)."""

    event: EventName
    backend: str | None
    issuer: str | None = None
    subject: str | None = None
    """As ``logging.subject`` says: plain, or its fingerprint."""
    server: str | None = None
    """The upstream authorization server's issuer identifier."""
    reason: str | None = None
    """Why a consent was asked for, or why it (or a refresh) failed: a fixed word, a
    status-table row, or the server's RFC 6749 error code."""
    action: str | None = None
    """The consent link's pending-action digest (connects started and redeemed)."""
    count: int | None = None
    """Records an operator purged."""
    request_id: str | None = None

    def to_json(self, ts: float) -> str:
        return sparse_line(ts, self, _FIELDS)


_FIELDS: Final = (
    "request_id",
    "backend",
    "issuer",
    "subject",
    "server",
    "reason",
    "action",
    "count",
)


class UpstreamAudit(EventTrail[Metrics]):
    """Writes the events (module docstring)."""

    def emit(
        self,
        event: EventName,
        backend: str | None,
        *,
        issuer: str | None = None,
        subject: str | None = None,
        server: str | None = None,
        reason: str | None = None,
        action: str | None = None,
        count: int | None = None,
        request_id: str | None = None,
    ) -> None:
        """Write ``event`` (``subject`` plain: it is fingerprinted here when configured)."""
        shown = self.subject(subject)
        record = UpstreamEvent(
            event,
            backend,
            issuer,
            shown,
            server,
            reason,
            action[:32] if action else None,
            count,
            request_id,
        )
        metrics = self._metrics
        if metrics is not None and backend is not None:
            consent = _CONSENT.get(event)
            if consent is not None:
                metrics.upstream_consents_total.labels(backend=backend, event=consent).inc()
            elif event in ("upstream_token_refreshed", "upstream_refresh_failed"):
                result = (
                    "ok"
                    if event == "upstream_token_refreshed"
                    else "unavailable"
                    if reason == "unavailable"
                    else "refused"
                )
                metrics.upstream_refreshes_total.labels(backend=backend, result=result).inc()
        self._write(record)
        failed = event in ("upstream_consent_failed", "upstream_refresh_failed")
        (_log.warning if failed else _log.info)(
            f"upstream.{event.removeprefix('upstream_')}",
            backend=backend,
            issuer=issuer,
            subject=shown,
            server=server,
            reason=reason,
            count=count,
        )
