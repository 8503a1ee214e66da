"""``POST <prefix>/connections/api/<backend>``: the command line's way to connect an account
(``mcp-gateway connect``, device style), for a person whose MCP client cannot open links.

No cookie, no page: the request carries the person's own MCP access token (``Authorization:
Bearer``), checked exactly as the MCP endpoint checks it (the :class:`~gateway.seams.Authenticator`
seam: issuer, signature or introspection, audience, expiry, revocation). The answer is the
caller's state at the backend; with ``{"link": true}`` and not connected, also a fresh consent
link of theirs (the same pending action an MCP client's link is, so whoever opens it must sign in
as that person). The command prints the link and polls this endpoint until ``connected``.
Answers: 200 ``{"backend", "state"[, "url", "expires_in"]}``; 401 with the authenticator's
challenge; 400 a body that is not ``{}`` or ``{"link": true}``; 503 the store did not answer;
and, before any of it, the login surface's 429 ``login_rate_limited`` page past the client
address's budget (``login.pre_auth_rate``, :mod:`gateway.login.address_budget`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from aiohttp import web

from gateway.backend.credentials.user_credential import UserCredential
from gateway.connections.consent_links import ConsentStarter
from gateway.errors import GatewayError
from gateway.jsonkit.read import JsonError, loads
from gateway.jsonkit.write import compact
from gateway.login.cookies import Session
from gateway.login.login_surface import LoginSurface
from gateway.seams import Authenticator, AuthRequest, ConsentNeeded, ConsentReason
from gateway.state.browser_records import owner_digest
from gateway.state.store import StoreUnavailable

__all__ = ["API_PATH", "ConnectApi"]

API_PATH: Final = "/connections/api"
MAX_BODY: Final = 1024
_HEADERS: Final = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def _json(status: int, body: Mapping[str, Any], **headers: str) -> web.Response:
    return web.Response(
        status=status,
        body=compact(dict(body)),
        content_type="application/json",
        headers={**_HEADERS, **headers},
    )


class ConnectApi:
    """The endpoint of the module docstring, one path per ``user_oauth`` backend."""

    def __init__(
        self,
        surface: LoginSurface,
        users: Mapping[str, UserCredential],
        links: ConsentStarter,
        authenticator: Authenticator,
        *,
        ttl_s: float,
        client_ip: Callable[[web.Request], str],
    ) -> None:
        """``client_ip``: the caller's address as the MCP endpoint reads it (behind trusted
        proxies, from ``X-Forwarded-For``): what the failed-authentication budget counts by."""
        self._client_ip = client_ip
        self._surface = surface
        self._users = users
        self._links = links
        self._auth = authenticator
        self._ttl_s = ttl_s

    def install(self) -> None:
        for name in self._users:
            self._surface.add_page(
                f"{API_PATH}/{name}", self._page(name), methods=("POST",), public=True
            )

    def _page(self, backend: str) -> Any:
        async def render(
            request: web.Request, session: Session | None, form: Mapping[str, str] | None
        ) -> web.StreamResponse:
            return await self._answer(request, backend)

        return render

    async def _answer(self, request: web.Request, backend: str) -> web.Response:
        user = self._users[backend]
        auth = AuthRequest(
            authorization=tuple(request.headers.getall("Authorization", [])),
            query_keys=frozenset(request.query),
            client_ip=self._client_ip(request),
            dpop=tuple(request.headers.getall("DPoP", [])),
            method=request.method,
        )
        try:
            principal = await self._auth.authenticate(auth)
        except GatewayError as refused:
            challenge = self._auth.challenge(refused)
            headers = {"WWW-Authenticate": challenge} if challenge else {}
            if refused.retry_after is not None:
                headers["Retry-After"] = str(refused.retry_after)
            error = {
                "error": refused.oauth_error or refused.row,
                "error_description": refused.message,
            }
            return _json(refused.status, error, **headers)
        want_link = await _wants_link(request)
        if want_link is None:
            text = 'the body must be {} or {"link": true}, as application/json'
            return _json(400, {"error": "invalid_request", "error_description": text})
        owner = owner_digest(principal.issuer, principal.subject)
        try:
            stored = await user.store.get(owner, backend)
        except StoreUnavailable:
            return _json(503, {"error": "unavailable"}, **{"Retry-After": "2"})
        state = "missing" if stored is None else stored.record.state(time.time())
        body: dict[str, Any] = {"backend": backend, "state": state}
        if want_link and state != "connected":
            reason: ConsentReason = "missing" if state == "missing" else "expired"
            try:
                link = await self._links.start(
                    principal, ConsentNeeded(backend, user.scope, reason)
                )
            except StoreUnavailable:
                return _json(503, {"error": "unavailable"}, **{"Retry-After": "2"})
            body.update(url=link.url, expires_in=int(self._ttl_s))
        return _json(200, body)


async def _wants_link(request: web.Request) -> bool | None:
    """Whether the body asks for a link; None for a body this endpoint cannot read."""
    if request.content_type != "application/json":
        return None
    raw = await request.content.read(MAX_BODY + 1)
    try:
        doc = loads(raw) if raw else {}
    except JsonError:
        return None
    if len(raw) > MAX_BODY or not isinstance(doc, dict) or not set(doc) <= {"link"}:
        return None
    return doc.get("link") is True
