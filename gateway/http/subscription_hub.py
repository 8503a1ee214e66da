"""The replica's open subscription streams: their bounds, policy reloads and the drain.

Per replica: ``limits.max_subscriptions_per_principal`` streams and
``limits.max_subscribed_uris_per_principal`` URIs per principal (429 ``too_many_subscriptions``;
counted under :func:`~gateway.limits.keys.principal_key`, the issuer and the subject),
``limits.max_subscriptions`` streams (503 ``over_capacity``). Each admitted stream holds a slot
with its own queue; a policy reload and the drain are told to every slot through it, and a
token's revocation (this replica's ``/admin/revoke``, or another's pushed over Redis) to every
slot whose stream runs on that token (:meth:`SubscriptionHub.bind`, :meth:`~SubscriptionHub.
revoked`), so no stream outlives its token by more than a loop turn.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Final

from gateway.config import Limits
from gateway.errors import OverCapacity, TooManySubscriptions
from gateway.seams import PolicySource

__all__ = ["RELOAD_POLL_S", "Slot", "SubscriptionHub"]

RELOAD_POLL_S: Final = 0.5
"""How often the hub looks for a new policy snapshot while streams are open."""


@dataclass(eq=False)
class Slot:
    """One admitted stream: whose, how many URIs it counts, and its event queue."""

    principal: str
    """The principal's limiter key (:func:`~gateway.limits.keys.principal_key`)."""
    uris: int
    queue: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    token: bytes | None = None
    """The revocation key of the token its open stream runs on (None: no stream open)."""


class SubscriptionHub:
    """Every open listen stream of this replica: the bounds, policy reloads and the drain."""

    def __init__(self, limits: Limits, policy: PolicySource | None) -> None:
        self._max = limits.max_subscriptions
        self._per_principal = limits.max_subscriptions_per_principal
        self._uris_per_principal = limits.max_subscribed_uris_per_principal
        self.lifetime_s = limits.subscription_lifetime_s
        self._policy = policy
        self._open: set[Slot] = set()
        self._streams: dict[str, int] = {}
        self._uris: dict[str, int] = {}
        self._tokens: dict[bytes, set[Slot]] = {}
        """Revocation key -> the slots whose stream runs on that token."""
        self._watch: asyncio.Task[None] | None = None
        self.draining = False

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, principal: str, uris: int) -> Slot:
        """Take a stream slot for ``principal`` (its limiter key) or raise the row of the bound
        it passes."""
        if self.draining or len(self._open) >= self._max:
            raise OverCapacity(retry_after=1)
        if (
            self._streams.get(principal, 0) >= self._per_principal
            or self._uris.get(principal, 0) + uris > self._uris_per_principal
        ):
            raise TooManySubscriptions()
        slot = Slot(principal, uris)
        self._open.add(slot)
        self._streams[principal] = self._streams.get(principal, 0) + 1
        self._uris[principal] = self._uris.get(principal, 0) + uris
        if self._watch is None and self._policy is not None:
            self._watch = asyncio.create_task(self._watch_policy(), name="subscription-policy")
        return slot

    def grow(self, slot: Slot, uris: int) -> None:
        """``slot`` subscribes ``uris`` more (a legacy ``resources/subscribe``), within the
        principal's URI bound, or raise ``too_many_subscriptions``."""
        if slot not in self._open:
            return
        if self._uris.get(slot.principal, 0) + uris > self._uris_per_principal:
            raise TooManySubscriptions()
        slot.uris += uris
        self._uris[slot.principal] = self._uris.get(slot.principal, 0) + uris

    def shrink(self, slot: Slot, uris: int) -> None:
        """``slot`` gave up ``uris`` of its URIs (unsubscribed, or access taken away)."""
        uris = min(uris, slot.uris)
        if slot not in self._open or uris <= 0:
            return
        slot.uris -= uris
        left = self._uris.get(slot.principal, 0) - uris
        if left > 0:
            self._uris[slot.principal] = left
        else:
            self._uris.pop(slot.principal, None)

    def bind(self, slot: Slot, token: bytes | None) -> None:
        """``slot``'s stream now runs on the token with the revocation key ``token`` (None: its
        stream ended). Call it with the key the request's token was just re-checked under
        (:meth:`gateway.seams.Authenticator.revocation_key`), with no wait in between."""
        if slot.token is not None:
            holders = self._tokens.get(slot.token)
            if holders is not None:
                holders.discard(slot)
                if not holders:
                    del self._tokens[slot.token]
        slot.token = token if slot in self._open else None
        if slot.token is not None:
            self._tokens.setdefault(slot.token, set()).add(slot)

    def revoked(self, token: bytes) -> None:
        """The token with this revocation key was revoked: every stream running on it ends."""
        for slot in self._tokens.get(token, ()):
            slot.queue.put_nowait(("revoked", None))

    def release(self, slot: Slot) -> None:
        if slot not in self._open:
            return
        self.bind(slot, None)
        self._open.discard(slot)
        for counts, n in ((self._streams, 1), (self._uris, slot.uris)):
            left = counts.get(slot.principal, 0) - n
            if left > 0:
                counts[slot.principal] = left
            else:
                counts.pop(slot.principal, None)

    def drain(self) -> None:
        """A graceful stop began: every stream ends with the graceful result now."""
        self.draining = True
        for slot in self._open:
            slot.queue.put_nowait(("drain", None))

    async def _watch_policy(self) -> None:
        assert self._policy is not None
        last = self._policy.current()
        try:
            while self._open:
                await asyncio.sleep(RELOAD_POLL_S)
                current = self._policy.current()
                if current is not last:
                    last = current
                    for slot in self._open:
                        slot.queue.put_nowait(("reload", current))
        finally:
            self._watch = None
