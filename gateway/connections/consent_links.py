"""The MCP side's link to a consent page: a pending action of kind ``connect``.

When a ``user_oauth`` backend has no usable token of the caller the front door asks
:meth:`ConsentStarter.start` for a link (the :class:`~gateway.seams.ConsentLinks` seam). It is a
pending action of the login surface (:mod:`gateway.login.actions`): single use, at most
``user_oauth.consent_ttl_s``, bound to the caller's issuer and subject, with nothing in its URL
but a random nonce (``<origin of resource><prefix>/connect/<nonce>``). Its body says which
backend and which scopes; the connect page (:mod:`.connect_pages`) acts on it only for the person
who started it. Each link is audited (``upstream_consent_started``) and counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway.backend.credentials.user_credential import UserCredential
from gateway.jsonkit.read import loads_object
from gateway.jsonkit.write import canonical
from gateway.login.actions import action_id
from gateway.login.login_surface import LoginSurface
from gateway.observability.upstream_events import UpstreamAudit
from gateway.seams import ConsentLink, ConsentNeeded, Principal
from gateway.state.browser_records import owner_digest

__all__ = ["CONNECT", "ConsentStarter", "Wanted", "link_body", "read_link_body"]

CONNECT: Final = "connect"
"""The kind of the consent page's pending actions (its path segment)."""

Wanted = tuple[str, str, str]
"""What a consent link asks for: (backend, scopes, reason)."""


def link_body(backend: str, scope: str, reason: str) -> bytes:
    return canonical({"be": backend, "scope": scope, "why": reason})


def read_link_body(body: bytes) -> Wanted:
    """Raises ``ValueError`` for a body this module did not write."""
    obj: dict[str, Any] = loads_object(body)
    backend, scope, reason = obj.get("be"), obj.get("scope"), obj.get("why")
    if not all(isinstance(value, str) for value in (backend, scope, reason)):
        raise ValueError("not a consent link body")
    return str(backend), str(scope), str(reason)


class ConsentStarter:
    """Implements :class:`gateway.seams.ConsentLinks` on the login surface's pending actions."""

    def __init__(
        self,
        surface: LoginSurface,
        audit: UpstreamAudit,
        users: Mapping[str, UserCredential],
        *,
        ttl_s: float,
    ) -> None:
        self._surface = surface
        self._audit = audit
        self._users = users
        self._ttl_s = ttl_s

    @property
    def account_url(self) -> str:
        return self._surface.account_url

    async def changed(self, principal: Principal, backend: str, timeout_s: float) -> bool:
        user = self._users.get(backend)
        if user is None:
            return False
        return await user.changed(owner_digest(principal.issuer, principal.subject), timeout_s)

    async def start(self, principal: Principal, needed: ConsentNeeded) -> ConsentLink:
        body = link_body(needed.backend, needed.scope, needed.reason)
        url = await self._surface.actions.start(CONNECT, principal, body, self._ttl_s)
        digest = action_id(CONNECT, url.rsplit("/", 1)[1])
        self._audit.emit(
            "upstream_consent_started",
            needed.backend,
            issuer=principal.issuer,
            subject=principal.subject,
            reason=needed.reason,
            action=digest,
        )
        return ConsentLink(url, digest[:32])
