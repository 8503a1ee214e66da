"""The pages where a person connects (or disconnects) their account at a ``user_oauth`` backend's
authorization server, on the login surface (docs/user-authorization.md#the-pages):

====================================  ======  ==============================================
``<prefix>/connect/<nonce>``          GET     the consent page of a link (a pending action):
                                              which backend, which server, a Connect button
                                      POST    the button: redeem the link, go to the server
``<prefix>/oauth/callback``           GET     the server's answer (the one redirect URI)
``<prefix>/connections/connect``      POST    the account page's Connect: a fresh link for
                                              the signed-in person, then its consent page
``<prefix>/connections/disconnect``   POST    the account page's Disconnect
``<prefix>/oauth/client.json``        GET     the gateway's client metadata document (public)
the account page                              a section: each backend, its state, the forms
====================================  ======  ==============================================

The MCP specification's rule for URL elicitation (2026-07-28 client/elicitation.mdx, Phishing):
the person who completes the authorization must be the person the link was made for. A link
is acted on only by its owner (the login surface's pending actions: anyone else gets
``login_identity_mismatch``, audited, and the link stays); the authorization it starts is bound
to the same person (:mod:`.upstream_flows`) and its answer is taken only in their signed-in
browser. Before the code goes anywhere the answer's ``iss`` is checked (RFC 9207 §2.4, no
normalisation); the code is redeemed with PKCE, ``redirect_uri`` and RFC 8707 ``resource``; the
tokens go into the person's record (:mod:`gateway.state.upstream_tokens`) and nowhere else: no
page, no log, no audit event shows them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Final
from urllib.parse import urlsplit

from aiohttp import web

from gateway.backend.credentials.upstream_grants import GrantRefused, GrantUnavailable
from gateway.backend.credentials.upstream_server import AuthorizationServer, ServerUnavailable
from gateway.backend.credentials.user_credential import UserCredential
from gateway.connections.account_connections import AccountConnections, known_user
from gateway.connections.consent_links import CONNECT, read_link_body
from gateway.connections.upstream_flows import Flow, Flows
from gateway.errors import (
    ConnectFailed,
    ConnectIssuerMismatch,
    ConnectStateInvalid,
    ConnectUnavailable,
    LoginBadRequest,
)
from gateway.jsonkit.write import compact
from gateway.login.cookies import Session, random_token
from gateway.login.forms import query
from gateway.login.login_surface import LoginSurface
from gateway.login.page_kinds import Visit
from gateway.login.pages import Html, html, page, redirect
from gateway.login.person import BrowserIdentity
from gateway.observability.upstream_events import UpstreamAudit
from gateway.state.store import StoreUnavailable
from gateway.state.upstream_tokens import UpstreamRecord

__all__ = ["CALLBACK_PATH", "DOCUMENT_PATH", "ConnectPages"]

CALLBACK_PATH: Final = "/oauth/callback"
DOCUMENT_PATH: Final = "/oauth/client.json"
PAGE_DEADLINE_S: Final = 10.0
RETRY_AFTER_S: Final = 2
_ERROR_CODE: Final = re.compile(r"[a-z_]{1,64}")


class ConnectPages:
    """The pages of the module docstring, for the ``user_oauth`` backends in ``users``."""

    def __init__(
        self,
        surface: LoginSurface,
        users: Mapping[str, UserCredential],
        flows: Flows,
        audit: UpstreamAudit,
        *,
        ttl_s: float,
        client_name: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._surface = surface
        self._users = users
        self._flows = flows
        self._audit = audit
        self._ttl_s = ttl_s
        self._client_name = client_name
        self._clock = clock
        base = surface.origin + surface.prefix
        self.redirect_uri = base + CALLBACK_PATH
        self.document_url = base + DOCUMENT_PATH

    def install(self) -> None:
        surface = self._surface
        surface.add_action(CONNECT, self._connect)
        surface.add_page(CALLBACK_PATH, self._callback)
        surface.add_page(DOCUMENT_PATH, self._document, methods=("GET", "HEAD"), public=True)
        AccountConnections(
            surface, self._users, self._audit, ttl_s=self._ttl_s, clock=self._clock
        ).install()

    # --- the consent page of a link --------------------------------------------------------

    async def _connect(self, request: web.Request, visit: Visit) -> web.StreamResponse:
        backend, scope, _ = read_link_body(await visit.peek())
        user = self._user(backend)
        server = await self._server(user)  # before the link is used up: it survives an outage
        if visit.form is None:
            return self._consent_page(visit, backend, scope, server)
        await visit.redeem()
        return await self._begin(visit.identity, user, server, scope)

    def _consent_page(
        self, visit: Visit, backend: str, scope: str, server: AuthorizationServer
    ) -> web.Response:
        body = html(
            '<p class="who">Signed in as <code>{}</code> at <code>{}</code>.</p>'
            "<p>Connect your own account at <code>{}</code>, so that the gateway can call the "
            "<code>{}</code> tools for you (and only for you).</p>{}"
            '<form method="post">{}<button type="submit" id="connect">Connect</button></form>'
            "<p>Didn't ask for this? Close this page: nothing happens.</p>",
            visit.identity.subject,
            visit.identity.issuer,
            server.issuer,
            backend,
            html("<p>Access asked for: <code>{}</code></p>", scope) if scope else Html(""),
            visit.csrf_field(),
        )
        # CSP form-action is checked on the redirect the button's answer is, too.
        return page("Connect your account", body, form_targets=[_origin(server)])

    async def _begin(
        self,
        identity: BrowserIdentity,
        user: UserCredential,
        server: AuthorizationServer,
        scope: str,
    ) -> web.Response:
        deadline = time.monotonic() + PAGE_DEADLINE_S
        try:
            client_id = await user.client.client_id(server, deadline)
        except ServerUnavailable:
            raise ConnectUnavailable(retry_after=RETRY_AFTER_S, detail="no client") from None
        verifier = random_token()
        flow = Flow(
            backend=user.backend,
            server=server.issuer,
            iss_required=server.iss_parameter,
            client_id=client_id,
            verifier=verifier,
            scope=scope,
            started=int(self._clock()),
        )
        state = await self._flows.begin(identity, flow)
        return redirect(
            user.client.authorization_url(
                server, client_id, state=state, verifier=verifier, scope=scope
            )
        )

    # --- the server's answer ---------------------------------------------------------------

    async def _callback(
        self, request: web.Request, session: Session | None, form: Mapping[str, str] | None
    ) -> web.StreamResponse:
        params = query(request)
        if session is None:
            raise ConnectStateInvalid(detail="answer in a browser without a session")
        state = params.get("state")
        if not state:
            raise ConnectStateInvalid(detail="answer without state")
        identity = session.identity
        flow = await self._flows.take(identity, state)
        if flow is None:
            self._failed(None, identity, "identity_mismatch")
            raise ConnectStateInvalid(detail="an authorization another person started")
        user = self._users.get(flow.backend)
        if user is None:
            raise ConnectStateInvalid(detail="backend no longer configured")
        # RFC 9207 §2.4 and MCP's authorization spec: before the code or an error is used.
        iss = params.get("iss")
        if (iss is not None and iss != flow.server) or (iss is None and flow.iss_required):
            self._failed(flow.backend, identity, "issuer_mismatch", flow.server)
            raise ConnectIssuerMismatch(detail="iss is not the server's")
        error = params.get("error")
        if error is not None:
            reason = error if _ERROR_CODE.fullmatch(error) else "other"
            self._failed(flow.backend, identity, reason, flow.server)
            raise ConnectFailed(detail=f"authorization answered {reason}")
        answer = params.get("code")
        if not answer:
            raise LoginBadRequest(detail="answer without code")
        server = await self._server(user)
        if server.issuer != flow.server:
            self._failed(flow.backend, identity, "server_changed", flow.server)
            raise ConnectFailed(detail="the backend's server changed meanwhile")
        deadline = time.monotonic() + PAGE_DEADLINE_S
        try:
            granted = await user.client.redeem(
                server, flow.client_id, answer, flow.verifier, deadline
            )
        except GrantRefused as refused:
            self._failed(flow.backend, identity, refused.error, flow.server)
            raise ConnectFailed(detail=f"token endpoint refused: {refused.error}") from None
        except GrantUnavailable:
            raise ConnectUnavailable(retry_after=RETRY_AFTER_S, detail="token endpoint") from None
        now = self._clock()
        record = UpstreamRecord(
            issuer=identity.issuer,
            subject=identity.subject,
            backend=flow.backend,
            server=flow.server,
            client_id=flow.client_id,
            access_token=granted.access_token,
            refresh_token=granted.refresh_token,
            expires_at=now + granted.expires_in,
            scope=granted.scope or flow.scope,
            connected_at=int(now),
            refreshed_at=int(now),
        )
        try:
            await user.store.put(identity.owner(), record, expect=None)
        except StoreUnavailable:
            raise ConnectUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None
        self._audit.emit(
            "upstream_consent_completed",
            flow.backend,
            issuer=identity.issuer,
            subject=identity.subject,
            server=flow.server,
        )
        body = html(
            "<p>Your account at <code>{}</code> is connected for the <code>{}</code> tools.</p>"
            "<p>Return to your MCP client and call the tool again.</p>"
            '<p><a href="{}">Your connected accounts</a></p>',
            flow.server,
            flow.backend,
            self._surface.account_url,
        )
        return page("Connected", body)

    def _failed(
        self, backend: str | None, identity: BrowserIdentity, reason: str, server: str | None = None
    ) -> None:
        self._audit.emit(
            "upstream_consent_failed",
            backend,
            issuer=identity.issuer,
            subject=identity.subject,
            server=server,
            reason=reason,
        )

    # --- the client metadata document ------------------------------------------------------

    async def _document(
        self, request: web.Request, session: Session | None, form: Mapping[str, str] | None
    ) -> web.StreamResponse:
        """OAuth Client ID Metadata Document (MCP 2026-07-28 client-registration.mdx): its URL
        is the client id of a gateway without a pre-registered client; a public web client."""
        document = {
            "client_id": self.document_url,
            "client_name": self._client_name,
            "client_uri": self._surface.origin,
            "redirect_uris": [self.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "web",
        }
        return web.Response(
            body=compact(document),
            content_type="application/json",
            headers={"Cache-Control": "public, max-age=300", "X-Content-Type-Options": "nosniff"},
        )

    # --- helpers ---------------------------------------------------------------------------

    def _user(self, backend: str) -> UserCredential:
        return known_user(self._users, backend)

    async def _server(self, user: UserCredential) -> AuthorizationServer:
        try:
            return await user.discovery.server(time.monotonic() + PAGE_DEADLINE_S)
        except ServerUnavailable:
            raise ConnectUnavailable(retry_after=RETRY_AFTER_S, detail="server") from None


def _origin(server: AuthorizationServer) -> str:
    parts = urlsplit(server.authorization_endpoint)
    return f"{parts.scheme}://{parts.netloc}"
