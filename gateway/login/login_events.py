"""What the login surface writes to the audit trail, the log and the metrics.

One :class:`LoginEvent` per sign-in (``login_signed_in``), refused page request
(``login_refused``: the status-table row, never anything of the request), sign-out
(``login_signed_out``) and pending action (``login_action_started``, ``login_action_redeemed``,
``login_identity_mismatch``). An event names the person by issuer and subject (as
``logging.subject`` says: plain or a fingerprint) and a pending action by its digest
(:func:`gateway.login.actions.action_id`), never by its link; it never carries a code, a state,
a nonce, a token, an ID token or a cookie value. Each is counted in
``mcp_gateway_login_events_total{event}`` (a refusal also in ``rejections_total{row}``) and
logged as ``login.<event>`` (a refusal with its reason, a fixed text, for diagnosis).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

from gateway.errors import LoginPageError
from gateway.login.person import BrowserIdentity
from gateway.observability.event_trail import EventTrail, sparse_line
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics

__all__ = ["LoginAudit", "LoginEvent"]

EventName = Literal[
    "login_signed_in",
    "login_refused",
    "login_signed_out",
    "login_action_started",
    "login_action_redeemed",
    "login_identity_mismatch",
]
_METRIC: Final = {name: name.removeprefix("login_") for name in get_args(EventName)}
_log = get_logger("gateway.login")


@dataclass(frozen=True, slots=True)
class LoginEvent:
    """One audit event of the login surface (module docstring)."""

    event: EventName
    request_id: str | None = None
    issuer: str | None = None
    subject: str | None = None
    """As ``logging.subject`` says: plain, or its fingerprint."""
    method: str | None = None
    """``oidc`` or ``verifier``: how the browser proved who it is."""
    row: str | None = None
    """A refusal's status-table row."""
    kind: str | None = None
    """A pending action's kind (``connect``, ``approve``)."""
    action: str | None = None
    """A pending action's digest (links started, redeemed and refused attempts)."""

    def to_json(self, ts: float) -> str:
        return sparse_line(ts, self, _FIELDS)


_FIELDS: Final = ("request_id", "issuer", "subject", "method", "row", "kind", "action")


class LoginAudit(EventTrail[Metrics]):
    """Writes the surface's events (module docstring)."""

    def _subject(self, identity: BrowserIdentity | None) -> str | None:
        return None if identity is None else self.subject(identity.subject)

    def _emit(self, event: LoginEvent) -> None:
        if self._metrics is not None:
            self._metrics.login_events_total.labels(event=_METRIC[event.event]).inc()
        self._write(event)

    def signed_in(self, identity: BrowserIdentity, method: str, request_id: str) -> None:
        subject = self._subject(identity)
        self._emit(LoginEvent("login_signed_in", request_id, identity.issuer, subject, method))
        _log.info("login.signed_in", issuer=identity.issuer, subject=subject, method=method)

    def signed_out(self, identity: BrowserIdentity, request_id: str) -> None:
        subject = self._subject(identity)
        self._emit(LoginEvent("login_signed_out", request_id, identity.issuer, subject))
        _log.info("login.signed_out", issuer=identity.issuer, subject=subject)

    def refused(
        self, error: LoginPageError, identity: BrowserIdentity | None, request_id: str
    ) -> None:
        """A refused page request; ``detail`` (a fixed text of the code) goes to the log only."""
        if self._metrics is not None:
            self._metrics.rejections_total.labels(row=error.row).inc()
        issuer = identity.issuer if identity is not None else None
        subject = self._subject(identity)
        self._emit(LoginEvent("login_refused", request_id, issuer, subject, row=error.row))
        _log.info(
            "login.refused", row=error.row, reason=error.detail, issuer=issuer, subject=subject
        )

    def action(self, event: EventName, kind: str, action: str, identity: BrowserIdentity) -> None:
        """A pending action started, redeemed, or refused to another person than its owner."""
        subject = self._subject(identity)
        self._emit(LoginEvent(event, None, identity.issuer, subject, kind=kind, action=action[:32]))
        level = _log.warning if event == "login_identity_mismatch" else _log.info
        level(
            f"login.{event.removeprefix('login_')}",
            kind=kind,
            action=action[:32],
            issuer=identity.issuer,
            subject=subject,
        )
