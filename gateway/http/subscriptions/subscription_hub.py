"""The replica's subscriptions: their bounds, policy reloads, revocations and the drain.

What is counted, per replica, under :func:`~gateway.limits.keys.principal_key` (the issuer and
the subject) for the per-principal bounds:

- a ``subscriptions/listen`` stream (:meth:`SubscriptionHub.admit`): one of the principal's
  ``limits.max_subscriptions_per_principal`` listens, from admission to its end;
- a subscribed URI, of a listen or of a legacy session: one of the principal's
  ``limits.max_subscribed_uris_per_principal``, while it is subscribed;
- a legacy session's GET stream (:meth:`~SubscriptionHub.attach`), while it is attached: one of
  the principal's GET streams, at most a quarter of ``limits.max_subscriptions`` (the share
  rule of the in-flight and connection bounds), so one caller cannot take the replica's streams.
  A session counts no listen slot: a GET stream with nothing subscribed holds only its GET.

Past a per-principal bound: 429 ``too_many_subscriptions``. Listens and attached GET streams
together hold at most ``limits.max_subscriptions`` streams (each keeps listens open at the
backends, whose pools have that size): 503 ``over_capacity`` past it, and while draining. Each
listen and each session has a slot with its own queue; a policy reload and the drain are told to
every slot through it, and a token's revocation (this replica's ``/admin/revoke``, or another's
pushed over Redis) to every slot whose stream runs on that token (:meth:`SubscriptionHub.bind`,
:meth:`~SubscriptionHub.revoked`), so no stream outlives its token by more than a loop turn.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from gateway.config import Limits
from gateway.errors import OverCapacity, TooManySubscriptions
from gateway.http.sse import KEEPALIVE
from gateway.seams import PolicySource

__all__ = ["RELOAD_POLL_S", "Slot", "SubscriptionHub"]

KEEPALIVE_S: Final = 25.0
"""An SSE comment is written this often on a quiet stream."""
RELOAD_POLL_S: Final = 0.5
"""How often the hub looks for a new policy snapshot while streams are open."""


@dataclass(eq=False)
class Slot:
    """A listen stream, or a legacy session: whose, what it counts, and its event queue."""

    principal: str
    """The principal's limiter key (:func:`~gateway.limits.keys.principal_key`)."""
    uris: int
    listen: bool = True
    """A ``subscriptions/listen`` stream; False for a legacy session (:meth:`SubscriptionHub.
    hold`), which counts its URIs and, while attached, its GET streams."""
    attached: int = 0
    """A session's GET streams counted now (one; two for a moment while one replaces another)."""
    queue: asyncio.Queue[tuple[str, Any]] = field(default_factory=asyncio.Queue)
    token: bytes | None = None
    """The revocation key of the token its open stream runs on (None: no stream open)."""

    async def next(
        self, ends_at: float, write: Callable[[bytes], Awaitable[None]]
    ) -> tuple[str, Any] | None:
        """The queue's next item; while none comes, a keepalive comment to ``write`` every
        :data:`KEEPALIVE_S` (idle proxies; a gone client shows); None once ``ends_at``
        (monotonic) has passed."""
        while True:
            left = ends_at - time.monotonic()
            if left <= 0:
                return None
            try:
                return await asyncio.wait_for(self.queue.get(), min(left, KEEPALIVE_S))
            except TimeoutError:
                if time.monotonic() < ends_at:
                    await write(KEEPALIVE)


class SubscriptionHub:
    """Every listen stream and legacy session of this replica (module docstring)."""

    def __init__(self, limits: Limits, policy: PolicySource | None) -> None:
        self._max = limits.max_subscriptions
        self._per_principal = limits.max_subscriptions_per_principal
        self._gets_per_principal = max(1, limits.max_subscriptions // 4)
        self._uris_per_principal = limits.max_subscribed_uris_per_principal
        self.lifetime_s = limits.subscription_lifetime_s
        self._policy = policy
        self._open: set[Slot] = set()
        self._streams = 0
        """Open listens and attached GET streams (the replica's bound)."""
        self._listens: dict[str, int] = {}
        self._gets: dict[str, int] = {}
        self._uris: dict[str, int] = {}
        self._tokens: dict[bytes, set[Slot]] = {}
        """Revocation key -> the slots whose stream runs on that token."""
        self._watch: asyncio.Task[None] | None = None
        self.draining = False

    def __len__(self) -> int:
        """Open streams: listens and attached GET streams."""
        return self._streams

    def admit(self, principal: str, uris: int) -> Slot:
        """A listen stream of ``principal`` (its limiter key) with ``uris`` URIs, or the row of
        the bound it passes."""
        self._check_capacity()
        if (
            self._listens.get(principal, 0) >= self._per_principal
            or self._uris.get(principal, 0) + uris > self._uris_per_principal
        ):
            raise TooManySubscriptions()
        slot = self._add(Slot(principal, uris))
        _add(self._listens, principal, 1)
        _add(self._uris, principal, uris)
        self._streams += 1
        return slot

    def hold(self, principal: str) -> Slot:
        """A legacy session's slot: it counts nothing until it subscribes (:meth:`grow`) or a GET
        attaches (:meth:`attach`). Refused (503) while draining."""
        if self.draining:
            raise OverCapacity(retry_after=1)
        return self._add(Slot(principal, 0, listen=False))

    def attach(self, slot: Slot) -> None:
        """A GET stream attaches to the session of ``slot``: one of its principal's GET streams
        and one of the replica's streams, or the row of the bound it passes."""
        self._check_capacity()
        if self._gets.get(slot.principal, 0) >= self._gets_per_principal:
            raise TooManySubscriptions()
        slot.attached += 1
        _add(self._gets, slot.principal, 1)
        self._streams += 1

    def detach(self, slot: Slot) -> None:
        """A GET stream of the session of ``slot`` ended (nothing if the slot was released)."""
        if slot.attached <= 0:
            return
        slot.attached -= 1
        _add(self._gets, slot.principal, -1)
        self._streams -= 1

    def grow(self, slot: Slot, uris: int) -> None:
        """``slot`` subscribes ``uris`` more (a legacy ``resources/subscribe``), within the
        principal's URI bound, or raise ``too_many_subscriptions``."""
        if slot not in self._open:
            return
        if self._uris.get(slot.principal, 0) + uris > self._uris_per_principal:
            raise TooManySubscriptions()
        slot.uris += uris
        _add(self._uris, slot.principal, uris)

    def shrink(self, slot: Slot, uris: int) -> None:
        """``slot`` gave up ``uris`` of its URIs (unsubscribed, or access taken away)."""
        uris = min(uris, slot.uris)
        if slot not in self._open or uris <= 0:
            return
        slot.uris -= uris
        _add(self._uris, slot.principal, -uris)

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
        """The listen ended, or the session: everything it counted is given back."""
        if slot not in self._open:
            return
        self.bind(slot, None)
        while slot.attached:
            self.detach(slot)
        self._open.discard(slot)
        if slot.listen:
            _add(self._listens, slot.principal, -1)
            self._streams -= 1
        _add(self._uris, slot.principal, -slot.uris)

    def drain(self) -> None:
        """A graceful stop began: every stream ends with the graceful result now."""
        self.draining = True
        for slot in self._open:
            slot.queue.put_nowait(("drain", None))

    def _check_capacity(self) -> None:
        if self.draining or self._streams >= self._max:
            raise OverCapacity(retry_after=1)

    def _add(self, slot: Slot) -> Slot:
        self._open.add(slot)
        if self._watch is None and self._policy is not None:
            self._watch = asyncio.create_task(self._watch_policy(), name="subscription-policy")
        return slot

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


def _add(counts: dict[str, int], key: str, n: int) -> None:
    """``counts[key] += n``, the key gone at zero (a principal with nothing open costs nothing)."""
    left = counts.get(key, 0) + n
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
