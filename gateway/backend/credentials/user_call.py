"""One request's credential at a ``user_oauth`` backend (:class:`UserCall`): the caller's upstream
access token, and what the upstream said of it (:mod:`.user_credential` keeps the records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gateway.backend.credentials.service_credential import CredentialError
from gateway.errors import UpstreamTokenUnavailable
from gateway.seams import ConsentNeeded, ConsentReason
from gateway.state.upstream_tokens import UpstreamRecord

__all__ = ["Held", "Holder", "UserCall", "scope_union"]


@dataclass(frozen=True, slots=True)
class Held:
    """A usable record as read, with its generation."""

    record: UpstreamRecord
    generation: str


def scope_union(*scopes: str | None) -> str:
    """Space-separated scopes, each once, in the order first named."""
    seen: dict[str, None] = {}
    for scope in scopes:
        for token in (scope or "").split():
            seen[token] = None
    return " ".join(seen)


class Holder(Protocol):
    """What a :class:`UserCall` needs of its backend's :class:`~.user_credential.UserCredential`."""

    backend: str
    scope: str
    """The configured ``scope``."""

    async def held(self, owner: bytes, deadline: float, *, rejected: str | None = None) -> Held: ...

    async def mark(
        self, owner: bytes, held: Held, reason: ConsentReason, *, wanted: str = ""
    ) -> None: ...


class UserCall:
    """The credential of one request (a ``ServiceCredential``): the caller's access token;
    after an upstream 401, one refresh; after a second, or a 403 ``insufficient_scope``, a
    reason to ask for consent (:attr:`consent`), which :meth:`UserCredential.settle` raises."""

    __slots__ = (
        "_credential",
        "_held",
        "_owner",
        "_rejected",
        "_retried",
        "consent",
        "failure",
        "wanted",
    )

    def __init__(self, credential: Holder, owner: bytes, held: Held) -> None:
        self._credential = credential
        self._owner = owner
        self._held = held
        self._rejected: str | None = None
        self._retried = False
        self.consent: ConsentNeeded | None = None
        self.failure: UpstreamTokenUnavailable | None = None
        self.wanted = ""

    async def token(self, deadline: float) -> str:
        if self._rejected is not None:
            rejected, self._rejected = self._rejected, None
            try:
                self._held = await self._credential.held(self._owner, deadline, rejected=rejected)
            except ConsentNeeded as needed:
                self.consent = needed
                raise CredentialError("the caller must connect again") from None
            except UpstreamTokenUnavailable as unavailable:
                self.failure = unavailable
                raise CredentialError("upstream token unavailable") from None
        token = self._held.record.access_token
        if token is None:  # judged usable, so never: fail closed all the same
            raise CredentialError("no upstream token")
        return token

    def invalidate(self, token: str) -> bool:
        """The upstream answered 401: refresh once and retry; the second time, ask again."""
        if self._retried or self._held.record.refresh_token is None:
            self.consent = ConsentNeeded(
                self._credential.backend,
                scope_union(self._credential.scope, self._held.record.scope),
                "rejected",
            )
            return False
        self._retried = True
        self._rejected = self._held.generation
        return True

    def insufficient_scope(self, token: str, scope: str | None) -> None:
        """The upstream answered 403 ``insufficient_scope`` (RFC 6750 §3.1), naming ``scope``."""
        record = self._held.record
        self.wanted = scope_union(record.wanted, scope)
        self.consent = ConsentNeeded(
            self._credential.backend,
            scope_union(self._credential.scope, record.scope, self.wanted),
            "scope",
        )

    async def settle(self) -> None:
        """After the request: raise what it found (consent needed, a refresh that could not
        be made), recording a refusal in the store first."""
        if self.consent is not None:
            if self.consent.reason in ("rejected", "scope"):
                await self._credential.mark(
                    self._owner, self._held, self.consent.reason, wanted=self.wanted
                )
            raise self.consent
        if self.failure is not None:
            raise self.failure
