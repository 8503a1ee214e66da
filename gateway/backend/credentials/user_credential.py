"""``credential.type: user_oauth``: every call carries the caller's own upstream token.

docs/user-authorization.md#per-user-upstream-authorization. For each call to the backend
(:meth:`UserCredential.for_call`) the caller's record is found by the digest of their verified
issuer and subject (:mod:`gateway.state.upstream_tokens`), cached on this replica while fresh,
and its access token is what the call sends, to this backend only. The catalog's own traffic
(discovery, lists, change streams) carries ``catalog_token`` or nothing: it acts for nobody, so
the tools stay listed whoever is connected, and no list waits on anyone's refresh.

* **No usable token** (none; disconnected or idle-expired; lapsed without a refresh token; the
  server refused the refresh token; the upstream refused a fresh one): :class:`ConsentNeeded`,
  before anything goes upstream (the front door answers with a consent link).
* **Refresh ahead of expiry** (``refresh_margin_s``, at most half the lifetime), once per record
  **across replicas**: one flight per person on this replica, and the store's lease across them
  (:data:`REFRESH_LEASE_S`, longer than a token request may take). Whoever does not hold the
  lease polls the record until the holder's write (a new generation) appears. The rotated refresh
  token is written with its access token in one compare-and-set write over the generation that
  was refreshed, so no refresh token is ever lost or put back.
* **Upstream 401**: refresh once (:meth:`UserCall.invalidate`) and retry; a second 401 marks the
  record ``reconnect_required`` (its tokens dropped) and asks for consent. **``invalid_grant``**
  at a refresh: the tokens are dropped the same way. **403 ``insufficient_scope``**: consent with
  the union of the granted, configured and challenged scopes.
* **Unavailable** (the store, or the server at a refresh a lapsed token needs):
  ``upstream_token_unavailable`` (503), never another token.
* A pushed revocation of the caller's gateway token (:meth:`UserCredential.forget`) drops what
  this replica cached for that person; their next call reads the store again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Final

from gateway.backend.credentials.service_credential import StaticBearer
from gateway.backend.credentials.upstream_grants import (
    TOKEN_TIMEOUT_S,
    GrantRefused,
    GrantUnavailable,
    UpstreamClient,
)
from gateway.backend.credentials.upstream_server import ServerDiscovery, ServerUnavailable
from gateway.backend.credentials.user_call import Held, UserCall, scope_union
from gateway.bounded import BoundedMap
from gateway.config import BackendConfig
from gateway.errors import UpstreamTokenUnavailable
from gateway.flights import SingleFlight
from gateway.observability.upstream_events import UpstreamAudit
from gateway.seams import CallerToken, ConsentNeeded, ConsentReason, Principal
from gateway.state.browser_records import owner_digest
from gateway.state.store import StoreUnavailable
from gateway.state.upstream_tokens import Stored, UpstreamRecord, UpstreamTokenStore

__all__ = ["REFRESH_LEASE_S", "UserCredential"]

REFRESH_LEASE_S: Final = TOKEN_TIMEOUT_S + 5.0
"""A refresh lease outlives the longest token request, so two holders never overlap."""
WAIT_POLL_S: Final = 0.025
"""How often a replica without the lease reads the record for the holder's write."""
CACHE_S: Final = 300.0
"""Longest a replica serves a record from memory (changes are told at once; this bounds a
missed notice)."""
TOUCH_EVERY_S: Final = 3600.0
"""A record's idle lifetime is extended at most this often per person and replica."""
MAX_CACHED: Final = 10_000
RETRY_AFTER_S: Final = 2


class UserCredential:
    """One ``user_oauth`` backend's credentials: the catalog's, and each caller's."""

    def __init__(
        self,
        settings: BackendConfig,
        client: UpstreamClient,
        discovery: ServerDiscovery,
        store: UpstreamTokenStore,
        *,
        audit: UpstreamAudit | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        cred = settings.credential
        self.backend = settings.name
        self.client = client
        self.discovery = discovery
        self.store = store
        self.scope = cred.scope or ""
        self._margin = float(cred.refresh_margin_s)
        self._catalog = StaticBearer(cred.catalog_token) if cred.catalog_token else None
        self._audit = audit
        self._clock = clock
        self._cache: BoundedMap[bytes, Held] = BoundedMap(MAX_CACHED)
        self._callers: BoundedMap[bytes, bytes] = BoundedMap(MAX_CACHED)
        """Caller token digest -> owner digest (a revocation names the token)."""
        self._touched: BoundedMap[bytes, float] = BoundedMap(MAX_CACHED)
        self._flights: SingleFlight[Held | ConsentNeeded | UpstreamTokenUnavailable] = (
            SingleFlight()
        )
        self.refreshes = 0
        """Refresh requests this replica sent (tests)."""
        self._waiting: dict[bytes, set[asyncio.Event]] = {}
        """Requests waiting for a person's record to change (a consent completing)."""
        store.on_change(self._changed)

    # --- the catalog's own traffic (no caller) ---------------------------------------------

    async def token(self, deadline: float) -> str:
        """``catalog_token``, or "" (the request goes without ``Authorization``)."""
        return await self._catalog.token(deadline) if self._catalog is not None else ""

    def invalidate(self, token: str) -> bool:
        return self._catalog.invalidate(token) if self._catalog is not None else False

    # --- per call ---------------------------------------------------------------------------

    async def for_call(
        self, caller: CallerToken | None, principal: Principal, deadline: float
    ) -> UserCall:
        """The caller's credential for one request to this backend; raises
        :class:`ConsentNeeded` or :class:`UpstreamTokenUnavailable` before anything is sent."""
        owner = owner_digest(principal.issuer, principal.subject)
        if caller is not None:
            self._callers.put(caller.digest, owner)
        held = await self.held(owner, deadline)
        await self._touch(owner)
        return UserCall(self, owner, held)

    async def held(self, owner: bytes, deadline: float, *, rejected: str | None = None) -> Held:
        """A usable record: cached, read, or refreshed (one flight per person and replica).
        ``rejected``: the generation whose access token the upstream just refused (refreshed
        even though it has not lapsed)."""
        if rejected is None:
            held = self._cache.get(owner, self._clock())
            if held is not None and not self._due(held.record):
                return held
        key = owner + (rejected or "").encode("ascii")
        flight = self._flights.joining(key)
        if flight is None:
            flight = self._flights.start(key, lambda: self._settle(owner, deadline, rejected))
        # Shielded: a caller that goes away does not cancel the refresh the others wait for.
        outcome = await asyncio.shield(flight)
        if isinstance(outcome, Held):
            return outcome
        if isinstance(outcome, ConsentNeeded):
            raise ConsentNeeded(outcome.backend, outcome.scope, outcome.reason)
        raise UpstreamTokenUnavailable(retry_after=RETRY_AFTER_S)

    def _due(self, record: UpstreamRecord) -> bool:
        """The access token is within its refresh margin (or past its expiry)."""
        lifetime = max(0.0, record.expires_at - float(record.refreshed_at or record.connected_at))
        return self._clock() >= record.expires_at - min(self._margin, lifetime / 2)

    async def _settle(
        self, owner: bytes, deadline: float, rejected: str | None
    ) -> Held | ConsentNeeded | UpstreamTokenUnavailable:
        try:
            stored = await self.store.get(owner, self.backend)
        except StoreUnavailable:
            return UpstreamTokenUnavailable(retry_after=RETRY_AFTER_S)
        judged = self._judge(stored)
        if not isinstance(judged, Held):
            return judged
        due = self._due(judged.record) or judged.generation == rejected
        if not due:
            return self._keep(owner, judged)
        record = judged.record
        if record.refresh_token is None:
            if judged.generation == rejected:
                return await self._refused(owner, judged, "rejected")
            if record.expires_at > self._clock():
                return self._keep(owner, judged)  # within the margin; nothing to refresh with
            return self._consent("expired", record)
        return await self._refresh(owner, judged, deadline, rejected)

    def _judge(self, stored: Stored | None) -> Held | ConsentNeeded:
        """A record as it is: usable (maybe due for a refresh), or a reason to ask again."""
        if stored is None:
            return self._consent("missing", None)
        record = stored.record
        state = record.state(self._clock())
        if state == "reconnect_required":
            return self._consent("scope" if record.wanted else "revoked", record)
        if state == "expired":
            return self._consent("expired", record)
        known = self.discovery.known
        if known is not None and known.issuer != record.server:
            return self._consent("missing", record)  # another server now: its grant stays there
        return Held(record, stored.generation)

    def _consent(self, reason: ConsentReason, record: UpstreamRecord | None) -> ConsentNeeded:
        wanted = (record.scope, record.wanted) if record is not None else ()
        return ConsentNeeded(self.backend, scope_union(self.scope, *wanted), reason)

    def _keep(self, owner: bytes, held: Held) -> Held:
        self._cache.put(owner, held, min(held.record.expires_at, self._clock() + CACHE_S))
        return held

    async def _refresh(
        self, owner: bytes, held: Held, deadline: float, rejected: str | None
    ) -> Held | ConsentNeeded | UpstreamTokenUnavailable:
        store, backend = self.store, self.backend
        try:
            lease = await store.lease(owner, backend, REFRESH_LEASE_S)
            while lease is None:
                # Another replica refreshes this record: its write is a new generation.
                if time.monotonic() >= deadline:
                    return UpstreamTokenUnavailable(retry_after=RETRY_AFTER_S)
                await asyncio.sleep(WAIT_POLL_S)  # a readiness poll of the shared record
                latest = await store.get(owner, backend)
                if latest is None or latest.generation != held.generation:
                    judged = self._judge(latest)
                    return self._keep(owner, judged) if isinstance(judged, Held) else judged
                lease = await store.lease(owner, backend, REFRESH_LEASE_S)
        except StoreUnavailable:
            return UpstreamTokenUnavailable(retry_after=RETRY_AFTER_S)
        try:
            return await self._refresh_held(owner, held, deadline, rejected)
        except StoreUnavailable:
            return UpstreamTokenUnavailable(retry_after=RETRY_AFTER_S)
        finally:
            with contextlib.suppress(StoreUnavailable):  # else it expires by itself
                await store.release(owner, backend, lease)

    async def _refresh_held(
        self, owner: bytes, held: Held, deadline: float, rejected: str | None
    ) -> Held | ConsentNeeded | UpstreamTokenUnavailable:
        """Under the lease: read again (the last holder may have written just now), refresh,
        write the rotated tokens over the generation that was refreshed."""
        latest = await self.store.get(owner, self.backend)
        if latest is None or latest.generation != held.generation:
            judged = self._judge(latest)
            return self._keep(owner, judged) if isinstance(judged, Held) else judged
        record = held.record
        assert record.refresh_token is not None
        started = self._clock()
        try:
            server = await self.discovery.server(deadline)
            self.refreshes += 1
            granted = await self.client.refresh(
                server, record.client_id, record.refresh_token, deadline
            )
        except GrantRefused as refused:
            self._event("upstream_refresh_failed", record, reason=refused.error)
            return await self._refused(owner, held, "revoked")
        except (GrantUnavailable, ServerUnavailable):
            self._event("upstream_refresh_failed", record, reason="unavailable")
            if rejected is None and record.expires_at > self._clock():
                return self._keep(owner, held)  # still valid: try again at the next call
            return UpstreamTokenUnavailable(retry_after=RETRY_AFTER_S)
        fresh = replace(
            record,
            access_token=granted.access_token,
            # RFC 6749 §6: a server that issues no new refresh token keeps the old one valid.
            refresh_token=granted.refresh_token or record.refresh_token,
            expires_at=started + granted.expires_in,
            scope=granted.scope or record.scope,
            refreshed_at=int(started),
        )
        generation = await self.store.put(owner, fresh, expect=held.generation)
        if generation is None:  # a reconnect or disconnect came first: theirs stands
            judged = self._judge(await self.store.get(owner, self.backend))
            return self._keep(owner, judged) if isinstance(judged, Held) else judged
        self._event("upstream_token_refreshed", fresh)
        return self._keep(owner, Held(fresh, generation))

    async def _refused(self, owner: bytes, held: Held, reason: ConsentReason) -> ConsentNeeded:
        """The server or the upstream refused the grant: drop its tokens (the record stays,
        saying ``reconnect_required``, with no token in it) and ask again."""
        await self.mark(owner, held, reason)
        return self._consent(reason, held.record)

    async def mark(
        self, owner: bytes, held: Held, reason: ConsentReason, *, wanted: str = ""
    ) -> None:
        """Write ``reconnect_required`` over ``held`` (best effort: a failure only means the
        next call finds it out again). ``wanted``: scopes the next consent asks for besides."""
        record = held.record
        if reason == "scope":
            changed = replace(record, status="reconnect_required", wanted=wanted)
        else:
            changed = replace(
                record, access_token=None, refresh_token=None, status="reconnect_required"
            )
        self._cache.pop(owner)
        with contextlib.suppress(StoreUnavailable):
            await self.store.put(owner, changed, expect=held.generation)

    async def _touch(self, owner: bytes) -> None:
        now = self._clock()
        if self._touched.get(owner, now) is not None:
            return
        self._touched.put(owner, now, now + TOUCH_EVERY_S)
        try:
            await self.store.touch(owner, self.backend)
        except StoreUnavailable:
            self._touched.pop(owner)

    def _event(self, event: str, record: UpstreamRecord, *, reason: str | None = None) -> None:
        if self._audit is not None:
            self._audit.emit(
                event,  # type: ignore[arg-type]  # one of the two refresh events
                self.backend,
                issuer=record.issuer,
                subject=record.subject,
                server=record.server,
                reason=reason,
            )

    # --- what other replicas and the revocation list say ----------------------------------

    def _changed(self, owner: bytes, backend: str) -> None:
        if backend == self.backend:
            self._cache.pop(owner)
            for event in self._waiting.get(owner, ()):
                event.set()

    async def changed(self, owner: bytes, timeout_s: float) -> bool:
        """Wait until the person's record changes (written or deleted, at any replica: the
        store tells every replica), at most ``timeout_s``; whether it did."""
        event = asyncio.Event()
        waiting = self._waiting.setdefault(owner, set())
        waiting.add(event)
        try:
            async with asyncio.timeout(max(0.0, timeout_s)):
                await event.wait()
            return True
        except TimeoutError:
            return False
        finally:
            waiting.discard(event)
            if not waiting:
                self._waiting.pop(owner, None)

    def forget(self, digest: bytes) -> None:
        """A caller token was revoked (or left the authenticator's cache): what this replica
        cached for its person goes (their next call reads the store again)."""
        owner = self._callers.pop(digest)
        if owner is not None:
            self._cache.pop(owner)

    def __len__(self) -> int:
        return len(self._cache)
