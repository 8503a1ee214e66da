"""Pending actions: what an MCP request leaves for its caller to finish in a browser.

A feature that needs the person behind an MCP call at a page (issue 45: connect an upstream
account; issue 46: approve one exact call) calls :meth:`ActionRecords.start` from the MCP
side with the caller's principal and an opaque body (the feature's own record, JSON bytes;
it holds no secret: seal one with the ring if it must). It gets back the page URL,
``<origin of resource><prefix>/<kind>/<nonce>``, to hand the client (a URL elicitation, or a
tool error's text): a single-use, short-lived link, on the origin of ``resource``, carrying no
identity and no credential, and worth nothing without the right person's sign-in.

The page (registered with :meth:`gateway.login.login_surface.LoginSurface.add_action`) redeems it
with :meth:`ActionRecords.peek` (show it) and :meth:`ActionRecords.redeem` (act on it, once):
both hand the body out **only when the signed-in browser is the person who started it**
(:func:`~gateway.login.person.same_person`'s rule, on the digest of issuer and subject the
record is bound to). For anyone else nothing happens to the record (the right person can still
use it), the page answers ``login_identity_mismatch``, and the attempt is audited and counted.
An unknown, expired or used nonce is ``login_not_found``, the same answer for each.

The records live in the shared store (:mod:`gateway.state.browser_records`): one replica's
memory, or Redis for several, so a link started at one replica is redeemed once at any.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from typing import Final

from gateway.errors import LoginIdentityMismatch, LoginNotFound, LoginUnavailable
from gateway.login.cookies import random_token
from gateway.login.login_events import LoginAudit
from gateway.login.person import BrowserIdentity
from gateway.seams import Principal
from gateway.state.browser_records import BrowserState
from gateway.state.store import StoreUnavailable

__all__ = ["KIND", "MAX_TTL_S", "NONCE", "ActionRecords", "action_id"]

KIND: Final = re.compile(r"[a-z][a-z0-9-]{0,31}")
"""A kind of pending action is a path segment: ``connect``, ``approve``."""
NONCE: Final = re.compile(r"[A-Za-z0-9_-]{43}")
"""A nonce is 32 random bytes, base64url."""
MAX_TTL_S: Final = 3600.0
RETRY_AFTER_S: Final = 2


def action_id(kind: str, nonce: str) -> str:
    """The record's key in the store and its name in the audit trail: a digest, so neither the
    store nor the trail holds a usable link."""
    return hashlib.sha256(f"{kind}:{nonce}".encode("ascii")).hexdigest()


class ActionRecords:
    """Starts and redeems pending actions (module docstring); implements the
    :class:`gateway.seams.PendingActions` seam the MCP side uses."""

    def __init__(
        self,
        store: BrowserState,
        *,
        base_url: str,
        audit: LoginAudit,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``base_url``: the origin of ``resource`` and the surface's prefix."""
        self._store = store
        self._base_url = base_url
        self._audit = audit
        self._clock = clock

    def url(self, kind: str, nonce: str) -> str:
        return f"{self._base_url}/{kind}/{nonce}"

    async def start(self, kind: str, principal: Principal, body: bytes, ttl_s: float) -> str:
        """Store a pending action for ``principal``; its page URL. Raises ``ValueError`` for a
        kind that is not a path segment or a lifetime out of (0, :data:`MAX_TTL_S`], and
        :class:`~gateway.state.store.StoreUnavailable` when the shared store cannot take it."""
        return await self.start_for(kind, BrowserIdentity.of(principal), body, ttl_s)

    async def start_for(self, kind: str, owner: BrowserIdentity, body: bytes, ttl_s: float) -> str:
        """As :meth:`start`, for a person signed in at the surface (a page that sends its own
        person on to a pending action's page)."""
        if not KIND.fullmatch(kind) or not 0 < ttl_s <= MAX_TTL_S:
            raise ValueError("a pending action needs a path-segment kind and a bounded lifetime")
        while True:  # 256 random bits: a collision would only cost another draw
            nonce = random_token()
            record = action_id(kind, nonce)
            if await self._store.put(record, owner.owner(), body, self._clock() + ttl_s):
                break
        self._audit.action("login_action_started", kind, record, owner)
        return self.url(kind, nonce)

    async def peek(self, kind: str, nonce: str, identity: BrowserIdentity) -> bytes:
        """The body, for the person who started it (not consumed)."""
        return await self._read(kind, nonce, identity, take=False)

    async def redeem(self, kind: str, nonce: str, identity: BrowserIdentity) -> bytes:
        """The body, for the person who started it, once: the record is gone afterwards."""
        return await self._read(kind, nonce, identity, take=True)

    async def _read(self, kind: str, nonce: str, identity: BrowserIdentity, *, take: bool) -> bytes:
        if not NONCE.fullmatch(nonce):
            raise LoginNotFound(detail="not a pending-action nonce")
        record = action_id(kind, nonce)
        try:
            found = await self._store.read(record, identity.owner(), take=take)
        except StoreUnavailable:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="store unavailable") from None
        if found.found == "foreign":
            self._audit.action("login_identity_mismatch", kind, record, identity)
            raise LoginIdentityMismatch(detail="pending action of another person")
        if found.body is None:
            raise LoginNotFound(detail="pending action unknown, expired or used")
        if take:
            self._audit.action("login_action_redeemed", kind, record, identity)
        return found.body
