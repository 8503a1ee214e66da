"""What an MCP request may leave for its caller to finish in a browser: the
:class:`PendingActions` Protocol (implemented by the login surface, ``gateway/login/actions.py``;
docs/user-authorization.md#pending-actions)."""

from __future__ import annotations

from typing import Protocol

from gateway.seams.callers import Principal

__all__ = ["LoginPages", "PendingActions"]


class PendingActions(Protocol):
    async def start(self, kind: str, principal: Principal, body: bytes, ttl_s: float) -> str:
        """Store a single-use pending action of ``kind`` (``connect``, ``approve``) for
        ``principal`` with the feature's opaque ``body``, redeemable for ``ttl_s`` seconds at
        the login surface by that person only; the page's URL (on the origin of ``resource``,
        no identity or credential in it). Raises ``StoreUnavailable`` when the shared store
        cannot take it."""
        ...


class LoginPages(Protocol):
    """The browser login surface as the rest of the gateway sees it (``gateway/login``): where
    the MCP side starts pending actions, and the account page a tool error may point to."""

    @property
    def actions(self) -> PendingActions: ...

    @property
    def account_url(self) -> str: ...
