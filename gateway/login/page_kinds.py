"""What the login surface's extension points take (:mod:`.login_surface`): how a browser proves
who it is (:class:`Prover`), an account page section, a pending action's page and its
:class:`Visit`, and a page of a fixed path (:data:`SurfacePage`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from gateway.login.actions import ActionRecords
from gateway.login.cookies import Method, Session, SignIn
from gateway.login.forms import CSRF_FIELD
from gateway.login.pages import Html, hidden_field
from gateway.login.person import BrowserIdentity

__all__ = ["AccountSection", "ActionPage", "Handler", "Prover", "SurfacePage", "Visit"]


class Prover(Protocol):
    """How a browser proves who it is: the relying party, or an external verifier."""

    method: Method

    @property
    def ready(self) -> bool: ...

    @property
    def failure(self) -> str | None: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def authorization_url(self, signin: SignIn) -> str: ...

    async def identity(self, params: Mapping[str, str], signin: SignIn) -> BrowserIdentity: ...


AccountSection = Callable[[web.Request, Session], Awaitable[Html]]
"""Renders one section of the account page for the signed-in person."""


@dataclass(frozen=True, slots=True)
class Visit:
    """A signed-in person at a pending action's page (what an :data:`ActionPage` gets)."""

    session: Session
    kind: str
    nonce: str
    form: Mapping[str, str] | None
    """A POST's fields (its CSRF token and origin already checked); None for a GET."""
    actions: ActionRecords

    @property
    def identity(self) -> BrowserIdentity:
        return self.session.identity

    def csrf_field(self) -> Html:
        """The hidden field every form of the page must carry."""
        return hidden_field(CSRF_FIELD, self.session.csrf)

    async def peek(self) -> bytes:
        """The record's body, if this person started it (not consumed); raises
        ``LoginIdentityMismatch`` (audited) or ``LoginNotFound``."""
        return await self.actions.peek(self.kind, self.nonce, self.identity)

    async def redeem(self) -> bytes:
        """As :meth:`peek`, and the record is gone afterwards (single use)."""
        return await self.actions.redeem(self.kind, self.nonce, self.identity)


ActionPage = Callable[[web.Request, Visit], Awaitable[web.StreamResponse]]
"""Answers a pending action's page (GET) and its forms (POST)."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


SurfacePage = Callable[
    [web.Request, Session | None, Mapping[str, str] | None], Awaitable[web.StreamResponse]
]
"""Answers a page of a fixed path (:meth:`~.login_surface.LoginSurface.add_page`): it gets the
signed-in session (None when nobody is: the page decides) and a POST's form (its CSRF token and
origin already checked, so a POST always has a session); None for a GET."""
