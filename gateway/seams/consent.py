"""Per-user upstream authorization as the layers see it: a ``user_oauth`` backend that has no
usable token of the caller raises :class:`ConsentNeeded` (``gateway/backend``); the front door
(``gateway/http``) asks :class:`ConsentLinks` (``gateway/connections``) for the link the person
opens to connect, and answers in the form the client can follow
(docs/user-authorization.md#per-user-upstream-authorization)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from gateway.seams.callers import Principal

__all__ = [
    "ConsentLink",
    "ConsentLinks",
    "ConsentNeeded",
    "ConsentReason",
    "UpstreamTokenAdmin",
]

ConsentReason = Literal["missing", "expired", "revoked", "rejected", "scope"]
"""Why: never connected (or disconnected, or idle-expired); the access token lapsed without a
refresh token; the server refused the refresh token (``invalid_grant``); the upstream refused
a fresh token (401 after a refresh); the upstream needs more scopes (403 ``insufficient_scope``)."""


class ConsentNeeded(Exception):
    """The caller must connect (again) their account at ``backend``'s authorization server
    before a call can go there. Carries no token and no identity."""

    def __init__(self, backend: str, scope: str, reason: ConsentReason) -> None:
        super().__init__(f"{backend}: {reason}")
        self.backend = backend
        self.scope = scope
        """The scopes the consent asks for (space-separated; the union after a refusal)."""
        self.reason: ConsentReason = reason


@dataclass(frozen=True, slots=True)
class ConsentLink:
    """A single-use consent link for one person: a page of the login surface."""

    url: str
    """``<origin of resource><prefix>/connect/<nonce>``: no identity, no credential in it."""
    id: str
    """An opaque id of the link (the 2025-11-25 ``elicitationId``): the digest of the pending
    action, never its nonce."""


class ConsentLinks(Protocol):
    async def start(self, principal: Principal, needed: ConsentNeeded) -> ConsentLink:
        """A fresh link for ``principal`` to connect ``needed.backend`` (raises
        ``StoreUnavailable`` when the shared store cannot take it)."""
        ...

    @property
    def account_url(self) -> str:
        """The account page, where every ``user_oauth`` backend can be connected."""
        ...

    async def changed(self, principal: Principal, backend: str, timeout_s: float) -> bool:
        """Wait until ``principal``'s record at ``backend`` changes (a connection completed, on
        any replica), at most ``timeout_s``; whether it did."""
        ...


class UpstreamTokenAdmin(Protocol):
    """The operators' view of the stored upstream tokens (``POST /admin/upstream-tokens/*``,
    ``mcp-gateway upstream-tokens``): never a token, only who, where and in which state."""

    async def records(
        self, backend: str | None, issuer: str | None, subject: str | None
    ) -> list[dict[str, Any]]:
        """The records of a backend (or every ``user_oauth`` backend), of one person or all:
        backend, issuer, subject, state, server, scope and times."""
        ...

    async def purge(self, backend: str | None, issuer: str | None, subject: str | None) -> int:
        """Delete the records of a backend, of a person, or of a person at a backend (at
        least one of the two named); how many went. Audited."""
        ...
