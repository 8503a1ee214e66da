"""The account page's part of per-user upstream authorization (:mod:`.connect_pages` has the
rest): a section listing every ``user_oauth`` backend with the signed-in person's state there
(connected, not connected, expired, reconnect required), a Connect (or Reconnect) and a
Disconnect form each.

Connect makes a fresh consent link for the signed-in person (a pending action of their own)
and sends the browser to its page, the same page an MCP client's link opens: every connection
goes through it (the Content Security Policy of the account page then never has to name another
server's origin). Disconnect deletes the person's record (tokens included) at once, on every
replica, and tells the server to revoke the refresh token where it has a revocation endpoint
(RFC 7009, best effort); it is audited (``upstream_disconnected``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Final

from aiohttp import web

from gateway.backend.credentials.user_credential import UserCredential
from gateway.connections.consent_links import CONNECT, link_body
from gateway.errors import ConnectUnavailable, LoginNotFound
from gateway.login.cookies import Session
from gateway.login.forms import CSRF_FIELD
from gateway.login.login_surface import LoginSurface
from gateway.login.pages import Html, hidden_field, html, redirect
from gateway.observability.upstream_events import UpstreamAudit
from gateway.state.store import StoreUnavailable
from gateway.state.upstream_tokens import ConnectionState

__all__ = ["DISCONNECT_PATH", "START_PATH", "AccountConnections", "known_user"]

START_PATH: Final = "/connections/connect"
DISCONNECT_PATH: Final = "/connections/disconnect"
REVOKE_DEADLINE_S: Final = 5.0
RETRY_AFTER_S: Final = 2
_STATES: Final[Mapping[ConnectionState | None, str]] = {
    "connected": "connected",
    "missing": "not connected",
    "expired": "expired: connect again",
    "reconnect_required": "reconnect required",
    None: "unknown right now",
}


def known_user(users: Mapping[str, UserCredential], backend: str) -> UserCredential:
    """The ``user_oauth`` backend of that name, else ``login_not_found``."""
    user = users.get(backend)
    if user is None:
        raise LoginNotFound(detail="no such user_oauth backend")
    return user


class AccountConnections:
    """The section and its two forms (module docstring)."""

    def __init__(
        self,
        surface: LoginSurface,
        users: Mapping[str, UserCredential],
        audit: UpstreamAudit,
        *,
        ttl_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._surface = surface
        self._users = users
        self._audit = audit
        self._ttl_s = ttl_s
        self._clock = clock

    def install(self) -> None:
        self._surface.add_page(START_PATH, self._start, methods=("POST",))
        self._surface.add_page(DISCONNECT_PATH, self._disconnect, methods=("POST",))
        self._surface.add_section("Connected accounts", self._section)

    async def _section(self, request: web.Request, session: Session) -> Html:
        owner, rows = session.identity.owner(), []
        for name, user in self._users.items():
            state: ConnectionState | None
            try:
                stored = await user.store.get(owner, name)
                state = "missing" if stored is None else stored.record.state(self._clock())
            except StoreUnavailable:
                stored, state = None, None
            rows.append(
                html(
                    '<tr id="backend-{}"><td><code>{}</code></td><td class="state">{}</td>'
                    "<td>{}</td></tr>",
                    name,
                    name,
                    _STATES[state],
                    self._forms(session, name, stored is not None),
                )
            )
        if not rows:
            return Html("<p>No backend acts with your own account.</p>")
        return html(
            "<table><tr><th>Backend</th><th>State</th><th></th></tr>{}</table>", Html.concat(rows)
        )

    def _forms(self, session: Session, backend: str, stored: bool) -> Html:
        prefix = self._surface.prefix
        csrf = hidden_field(CSRF_FIELD, session.csrf)
        chosen = hidden_field("backend", backend)
        label = "Reconnect" if stored else "Connect"
        forms = [
            html(
                '<form method="post" action="{}">{}{}<button type="submit" name="do" '
                'value="connect">{}</button></form>',
                prefix + START_PATH,
                csrf,
                chosen,
                label,
            )
        ]
        if stored:
            forms.append(
                html(
                    '<form method="post" action="{}">{}{}<button type="submit" name="do" '
                    'value="disconnect">Disconnect</button></form>',
                    prefix + DISCONNECT_PATH,
                    csrf,
                    chosen,
                )
            )
        return Html.concat(forms)

    async def _start(
        self, request: web.Request, session: Session | None, form: Mapping[str, str] | None
    ) -> web.StreamResponse:
        """The account page's Connect: a link of the signed-in person's own, then its page."""
        assert session is not None and form is not None  # a POST: CSRF-checked with a session
        user = known_user(self._users, form.get("backend", ""))
        body = link_body(user.backend, user.scope, "account")
        try:
            url = await self._surface.actions.start_for(
                CONNECT, session.identity, body, self._ttl_s
            )
        except StoreUnavailable:
            raise ConnectUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None
        return redirect(url)

    async def _disconnect(
        self, request: web.Request, session: Session | None, form: Mapping[str, str] | None
    ) -> web.StreamResponse:
        assert session is not None and form is not None
        user = known_user(self._users, form.get("backend", ""))
        identity = session.identity
        owner = identity.owner()
        try:
            stored = await user.store.get(owner, user.backend)
            await user.store.delete(owner, user.backend)
        except StoreUnavailable:
            raise ConnectUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None
        record = stored.record if stored is not None else None
        if record is not None and record.refresh_token is not None:
            server = user.discovery.known
            if server is not None and server.issuer == record.server:  # RFC 7009, best effort
                deadline = time.monotonic() + REVOKE_DEADLINE_S
                await user.client.revoke(server, record.client_id, record.refresh_token, deadline)
        self._audit.emit(
            "upstream_disconnected",
            user.backend,
            issuer=identity.issuer,
            subject=identity.subject,
            server=record.server if record else None,
            reason="account",
        )
        return redirect(self._surface.prefix + "/account")
