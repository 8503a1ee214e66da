"""Legacy subscriptions (2025-03-26 / 2025-06-18 / 2025-11-25): the session that holds them.

server/resources.mdx §Subscriptions: a client subscribes to a URI with ``resources/subscribe``
and hears ``notifications/resources/updated`` on the stream the server keeps for it; on the
streamable HTTP transport that is the session's GET stream (basic/transports.mdx §Listening for
Messages from the Server, §Session Management). The gateway keeps replicas stateless for
everything else, so a session here is only what a subscription needs:

- **The id.** ``initialize`` mints an ``Mcp-Session-Id`` only when this caller could subscribe
  or hear a ``list_changed`` (the capabilities
  :func:`gateway.http.subscriptions.subscription_plan.listen_capabilities` grants). It is
  ``<nonce>.<mac>``: 16 random bytes and an HMAC-SHA256 (this process's random key) over the nonce
  and the principal (issuer, subject, client id). Nothing is stored when it is minted. Only this
  process can verify it, and only for that principal: a token of anyone else presenting it gets 404
  ``session_not_found``, as does an id from another replica or one that ended. Every other request
  ignores the header (stateless), except that an id this replica ended is 404 on any legacy request
  (:meth:`LegacySessions. refuse_ended`).
- **The state**, held on this replica while the session has a subscribed URI or a GET stream
  (created by its first ``resources/subscribe`` or GET, dropped without ending the session when
  it has neither: the id stays valid): the subscribed URIs (exposed form, normalised) and a slot
  of the :class:`~gateway.http.subscriptions.subscription_hub.SubscriptionHub`, so each URI counts
  against ``limits.max_subscribed_uris_per_principal`` with the listen streams' URIs, and an
  attached GET counts as a stream of the replica while it is attached. A session takes none of the
  principal's ``max_subscriptions_per_principal`` listen slots: a client that only opens the GET
  stream holds nothing once it leaves.
- **The stream** (:mod:`gateway.http.subscriptions.legacy_stream`): while a GET is attached, the
  gateway holds listens at the backends (the 2026 path's machinery,
  :class:`gateway.seams.Listening`, with the gateway's credential) for what
  :func:`~gateway.http.subscriptions.subscription_plan.plan` grants.

A session ends (and answers 404 after) on ``DELETE``, when it kept subscriptions without a GET
attached for :data:`IDLE_S`, at a policy reload that takes away the baseline or the subscription
method's scopes, and at a graceful stop. Its requests must reach the replica that holds it: legacy
subscriptions need session affinity (docs/protocol.md#legacy-subscriptions).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from dataclasses import dataclass, field
from typing import Final

from gateway import b64url
from gateway.bounded import BoundedMap
from gateway.config import Config
from gateway.deadlines import deadline_at
from gateway.errors import (
    BackendFailure,
    JsonRpcId,
    LegacyResourceNotFound,
    MethodNotFound,
    SessionNotFound,
    SessionRequired,
)
from gateway.http.condition_gate import readable
from gateway.http.progress import ProgressRelay
from gateway.http.subscriptions.subscription_hub import Slot, SubscriptionHub
from gateway.http.subscriptions.subscription_plan import listen_capabilities
from gateway.http.turn import Route, Turn, bounded_success, check_expiry, require_method_scopes
from gateway.limits.keys import principal_key
from gateway.protocol.messages import McpMessage
from gateway.seams import Backend, Era, Listening, Policy, Principal

__all__ = [
    "IDLE_S",
    "SESSION_HEADER",
    "SUBSCRIPTION_METHOD",
    "LegacySession",
    "LegacySessions",
    "SessionIds",
    "Subscribed",
]

SESSION_HEADER: Final = "Mcp-Session-Id"
SUBSCRIPTION_METHOD: Final = "subscriptions/listen"
"""The ``methods:`` key whose scopes govern subscriptions in both eras (docs/policy.md)."""
IDLE_S: Final = 30.0
"""A session with subscriptions and no GET stream is kept this long (the client reconnecting),
then ends."""
ENDED_KEPT: Final = 8192
"""Ended session ids remembered (404) per replica; the oldest are forgotten first."""
MAX_ID_CHARS: Final = 64
_NONCE_BYTES: Final = 16
_MAC_BYTES: Final = 16


def _owner(who: Principal) -> bytes:
    return "\x00".join((who.issuer, who.subject, who.client_id or "")).encode()


class SessionIds:
    """Mints and checks session ids bound to a principal (module docstring)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)

    def mint(self, who: Principal) -> str:
        nonce = secrets.token_bytes(_NONCE_BYTES)
        return f"{b64url.encode(nonce)}.{b64url.encode(self._mac(nonce, who))}"

    def valid(self, raw: str, who: Principal) -> bool:
        if len(raw) > MAX_ID_CHARS:
            return False
        nonce_text, dot, mac_text = raw.partition(".")
        nonce, mac = b64url.decode_canonical(nonce_text), b64url.decode_canonical(mac_text)
        if not dot or nonce is None or mac is None or len(nonce) != _NONCE_BYTES:
            return False
        return hmac.compare_digest(mac, self._mac(nonce, who))

    def _mac(self, nonce: bytes, who: Principal) -> bytes:
        digest = hmac.new(self._key, nonce + b"\x00" + _owner(who), hashlib.sha256).digest()
        return digest[:_MAC_BYTES]


@dataclass(eq=False)
class LegacySession:
    """One session's subscriptions on this replica."""

    id: str
    slot: Slot
    uris: dict[str, None] = field(default_factory=dict)
    """Subscribed URIs (exposed form), in subscription order."""
    stream: asyncio.Task[object] | None = None
    """The attached GET stream's handler task, if any."""
    idle: asyncio.TimerHandle | None = None
    ended: bool = False


@dataclass(frozen=True, slots=True)
class Subscribed:
    """What the attached stream made of a change of the session's URIs (a ``refilter``)."""

    acknowledged: frozenset[str]
    """URIs the backends acknowledged, after the change."""
    refused: frozenset[str]
    """Backends whose listen could not be (re)opened (unreachable, garbled)."""


class LegacySessions:
    """This replica's legacy sessions, ``resources/subscribe`` and ``resources/unsubscribe``."""

    def __init__(
        self,
        *,
        config: Config,
        hub: SubscriptionHub,
        listening: Listening | None,
        backend: Backend,
    ) -> None:
        self.hub = hub
        self.listening = listening
        self.backend = backend
        self.ack_window_s = config.limits.request_deadline_s
        self._cap = config.limits.max_response_bytes
        self._ids = SessionIds()
        self._live: dict[str, LegacySession] = {}
        self._ended: BoundedMap[str, bool] = BoundedMap(ENDED_KEPT)
        """Ids this replica ended (the oldest forgotten first)."""

    def __len__(self) -> int:
        return len(self._live)

    def routes(self) -> dict[str, Route]:
        legacy: frozenset[Era] = frozenset({"legacy"})
        return {
            "resources/subscribe": Route(self._subscribe, eras=legacy),
            "resources/unsubscribe": Route(self._unsubscribe, eras=legacy),
        }

    # --- the id ---------------------------------------------------------------------------

    def capabilities(self, policy: Policy, who: Principal) -> dict[str, dict[str, bool]]:
        """What ``initialize`` may advertise to this caller (empty: no session is minted)."""
        caps = listen_capabilities(policy, who, self.listening, self.backend)
        return caps if any(v for kind in caps.values() for v in kind.values()) else {}

    def mint(self, who: Principal) -> str:
        return self._ids.mint(who)

    def session(self, raw: str | None, who: Principal, *, create: bool = True) -> LegacySession:
        """The caller's live session named by ``raw`` (created here on first use), or the row:
        400 without an id, 404 for one this replica cannot hold for this caller."""
        if raw is None:
            raise SessionRequired()
        if raw in self._ended or not self._ids.valid(raw, who):
            raise SessionNotFound()
        found = self._live.get(raw)
        if found is None:
            if not create:
                raise SessionNotFound()
            found = LegacySession(raw, self.hub.hold(principal_key(who)))
            self._live[raw] = found
        return found

    def refuse_ended(self, raw: str | None, request_id: JsonRpcId | None) -> None:
        """Any legacy request naming a session this replica ended gets 404: "the server MAY
        terminate the session at any time, after which it MUST respond to requests containing
        that session ID with HTTP 404" (2025-11-25 basic/transports.mdx §Session Management 3).
        Other ids are ignored outside the session's own requests (stateless)."""
        if raw is not None and raw in self._ended:
            raise SessionNotFound(request_id=request_id, era="legacy")

    def held(self, raw: str | None, who: Principal) -> LegacySession | None:
        """The caller's session named by ``raw`` if this replica holds its state; None for a
        valid id never used here (nothing to create for); the row of :meth:`session` else."""
        try:
            return self.session(raw, who, create=False)
        except SessionNotFound:
            if raw is None or raw in self._ended or not self._ids.valid(raw, who):
                raise
            return None

    def end(self, session: LegacySession) -> None:
        """The session is over: its slot is released, its id answers 404 from now on."""
        if session.ended:
            return
        session.ended = True
        if session.idle is not None:
            session.idle.cancel()
        self._live.pop(session.id, None)
        self._ended.put(session.id, True)
        self.hub.release(session.slot)
        session.slot.queue.put_nowait(("end", None))  # an attached stream stops

    def end_id(self, raw: str | None, who: Principal) -> None:
        """``DELETE``: end the caller's session (one never used on this replica included)."""
        session = self.held(raw, who)
        if session is not None:
            self.end(session)
        elif raw is not None:
            self._ended.put(raw, True)

    def settle(self, session: LegacySession) -> None:
        """After a request of the session: with no GET stream attached, its state is dropped at
        once when it has no URI (nothing to keep; the id stays valid), else the session ends
        unless a GET attaches within :data:`IDLE_S` of the first moment it had none."""
        if session.stream is not None or session.ended:
            return
        if not session.uris:
            self._drop(session)
        elif session.idle is None:
            loop = asyncio.get_running_loop()
            session.idle = loop.call_later(IDLE_S, self._expire, session)

    def _expire(self, session: LegacySession) -> None:
        session.idle = None
        if session.stream is None:
            self.end(session)

    def _drop(self, session: LegacySession) -> None:
        """Forget the state of a session that holds nothing; unlike :meth:`end`, its id stays
        valid (a later subscribe or GET creates the state again)."""
        session.ended = True  # this object is done; the id is not
        if session.idle is not None:
            session.idle.cancel()
        self._live.pop(session.id, None)
        self.hub.release(session.slot)

    def drain(self) -> None:
        """A graceful stop began: every session ends (the streams with the hub's drain)."""
        for session in list(self._live.values()):
            self.end(session)

    # --- resources/subscribe, resources/unsubscribe ---------------------------------------

    def _subscribable(self) -> bool:
        listening = self.listening
        return listening is not None and any(o.subscribe for o in listening.listen_offers())

    def may_subscribe(self, policy: Policy, who: Principal, uri: str, client_ip: str = "") -> bool:
        """The caller may read ``uri`` (scopes and ``when:`` conditions) and its backend can be
        subscribed to: else the URI is refused like an absent one (hidden = absent)."""
        if self.listening is None:
            return False
        route = self.backend.route_uri(uri)
        subscribing = {o.backend for o in self.listening.listen_offers() if o.subscribe}
        if route is None or route[0] not in subscribing:
            return False
        return readable(policy, who, uri, backend=route[0], client_ip=client_ip)

    async def _subscribe(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        if not self._subscribable():
            raise MethodNotFound()
        require_method_scopes(turn, SUBSCRIPTION_METHOD)
        who = turn.principal
        session = self.session(turn.request.headers.get(SESSION_HEADER), who)
        try:
            uri = _normal(turn.policy, message.uri)
            if uri is None or not self.may_subscribe(turn.policy, who, uri, turn.ctx.client_ip):
                raise LegacyResourceNotFound()
            check_expiry(turn, admitted)
            if uri not in session.uris:
                self.hub.grow(session.slot, 1)
                session.uris[uri] = None
                await self._confirm(session, uri, turn.deadline)
        finally:
            self.settle(session)  # a refused URI leaves no state behind
        return bounded_success(message, {}, self._cap)

    async def _confirm(self, session: LegacySession, uri: str, deadline: float) -> None:
        """With a stream attached, wait until the backend acknowledged ``uri``; undo it if the
        backend did not (absent there) or could not be asked (a backend failure)."""
        if session.stream is None:
            return  # the stream opens its listens when it attaches
        done: asyncio.Future[Subscribed | None] = asyncio.get_running_loop().create_future()
        session.slot.queue.put_nowait(("refilter", (done, deadline)))
        try:
            with deadline_at(deadline):
                outcome = await done
        except TimeoutError:
            outcome = Subscribed(frozenset(), frozenset({"timeout"}))
        if outcome is None or uri in outcome.acknowledged:
            return  # the stream went away meanwhile: kept for the next one
        self.forget(session, uri)
        if outcome.refused:
            raise BackendFailure(detail="subscription listen refused")
        raise LegacyResourceNotFound()

    def forget(self, session: LegacySession, uri: str) -> None:
        if session.uris.pop(uri, 0) is None:
            self.hub.shrink(session.slot, 1)

    async def _unsubscribe(
        self, message: McpMessage, turn: Turn, relay: ProgressRelay | None, admitted: bool
    ) -> bytes:
        if not self._subscribable():
            raise MethodNotFound()
        require_method_scopes(turn, SUBSCRIPTION_METHOD)
        session = self.held(turn.request.headers.get(SESSION_HEADER), turn.principal)
        check_expiry(turn, admitted)
        uri = _normal(turn.policy, message.uri)
        if session is not None and uri is not None and uri in session.uris:
            self.forget(session, uri)
            if session.stream is not None:
                session.slot.queue.put_nowait(("refilter", None))
            self.settle(session)
        return bounded_success(message, {}, self._cap)  # not subscribed: nothing to undo


def _normal(policy: Policy, uri: str | None) -> str | None:
    """A subscription is held, asked for and matched under the URI's normal form, the one a
    ``resources/read`` decides on and forwards; None for no URI (raises for an ambiguous one)."""
    return None if uri is None else policy.resource_uri(uri)
