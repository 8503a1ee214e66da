"""The approval desk: the :class:`~gateway.seams.Approvals` seam on the shared store
(:mod:`gateway.state.approval_records`), and what the approval pages ask of it.

The front door asks :meth:`ApprovalDesk.request` for a call a rule holds: the binding's live
record (pending, or approved and not yet used), else a new pending one, whose page is
``<origin of resource><login prefix>/approve/<id>`` (the id is 32 random bytes; the page shows
nothing without the right person's sign-in). A 2026-07-28 retry names its record in the sealed
state (:meth:`ApprovalDesk.find` checks it is for this very call). The call runs only after
:meth:`ApprovalDesk.consume` moved the record from approved to consumed, once across replicas.

Deciding (:meth:`ApprovalDesk.decide`): ``by: self``, only the caller (same issuer and subject
as the MCP principal); an approver set, only a person whose sign-in carries the claim value,
and never the caller (a second person). Anyone else: ``approval_forbidden``, nothing changes.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable
from typing import Final

from gateway.approvals.records import RecordBody, binding_digest, redacted_preview
from gateway.approvals.webhook import ApprovalWebhook
from gateway.errors import (
    ApprovalClosed,
    ApprovalForbidden,
    ApprovalRefused,
    ApprovalUnavailable,
    LoginNotFound,
    LoginUnavailable,
)
from gateway.login.cookies import random_token
from gateway.login.person import BrowserIdentity
from gateway.observability.approval_events import ApprovalAudit
from gateway.seams import ApprovalBinding, ApprovalTicket, HeldCall
from gateway.state.approval_records import ApprovalStore, StoredApproval
from gateway.state.store import StoreUnavailable

__all__ = ["KIND", "ApprovalDesk", "Shown"]

KIND: Final = "approve"
"""The approval page's path segment (a pending-action kind of the login surface)."""
RETRY_AFTER_S: Final = 2
POLL_S: Final = 0.25
MAX_LISTED: Final = 50

Shown = tuple[StoredApproval, RecordBody, str]
"""A record for a page: the stored record, its body, its digest."""


def _digest(record: StoredApproval) -> str:
    return hashlib.sha256(record.id.encode() + b"\x00" + record.body).hexdigest()


class ApprovalDesk:
    """Implements :class:`gateway.seams.Approvals` (module docstring)."""

    def __init__(
        self,
        store: ApprovalStore,
        audit: ApprovalAudit,
        *,
        base_url: str,
        webhook: ApprovalWebhook | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``base_url``: the origin of ``resource`` and the login surface's prefix."""
        self._store = store
        self._audit = audit
        self._base_url = base_url
        self._webhook = webhook
        self._clock = clock

    @property
    def list_url(self) -> str:
        return f"{self._base_url}/approvals"

    def url(self, record_id: str) -> str:
        return f"{self._base_url}/{KIND}/{record_id}"

    def _ticket(self, record: StoredApproval) -> ApprovalTicket:
        return ApprovalTicket(
            id=record.id,
            url=self.url(record.id),
            state=record.state,
            digest=_digest(record),
            approvers=record.approvers,
            expires_at=record.expires_at,
        )

    async def _settled(self, record_id: str) -> StoredApproval | None:
        record, expired = await self._store.settle(record_id, self._clock())
        if record is not None and expired:
            body = RecordBody.decode(record.body)
            self._audit.emit(
                "approval_expired",
                _digest(record),
                tool=body.binding.tool,
                backend=body.binding.backend,
                approvers=record.approvers,
                issuer=body.binding.issuer,
                subject=body.binding.subject,
            )
        return record

    # --- the front door (the seam) ---------------------------------------------------------

    async def request(self, held: HeldCall, request_id: str) -> ApprovalTicket:
        key = binding_digest(held.binding)
        try:
            found = await self._store.by_binding(key)
            if found is not None:
                record = await self._settled(found.id)
                if record is not None and record.state in ("pending", "approved"):
                    return self._ticket(record)
                if record is not None and record.state == "denied":
                    await self._store.forget(key, record.id)  # told once; the next call asks
                    return self._ticket(record)
            return await self._create(key, held, request_id)
        except StoreUnavailable:
            raise ApprovalUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None

    async def _create(self, key: str, held: HeldCall, request_id: str) -> ApprovalTicket:
        binding, rule, now = held.binding, held.rule, int(self._clock())
        body = RecordBody(
            binding, rule, redacted_preview(held.arguments, rule.redact), now, now + rule.ttl_s
        )
        while True:  # 256 random bits: a collision would only cost another draw
            record = StoredApproval(
                id=random_token(),
                binding=key,
                approvers=rule.approvers if rule.by != "self" else _self_set(binding),
                body=body.encode(),
                expires_at=float(body.expires_at),
            )
            if await self._store.create(record):
                break
        ticket = self._ticket(record)
        self._audit.emit(
            "approval_requested",
            ticket.digest,
            tool=binding.tool,
            backend=binding.backend,
            approvers=rule.approvers,
            issuer=binding.issuer,
            subject=binding.subject,
            preview_sha256=body.preview_sha256,
            request_id=request_id,
        )
        if self._webhook is not None and rule.by != "self":
            self._webhook.notify(ticket, body)
        return ticket

    async def find(self, record_id: str, binding: ApprovalBinding) -> ApprovalTicket:
        try:
            record = await self._settled(record_id)
        except StoreUnavailable:
            raise ApprovalUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None
        if record is None:
            raise ApprovalRefused("unknown", detail="approval record unknown or gone")
        if record.binding != binding_digest(binding):
            raise ApprovalRefused("changed", detail="approval for another call")
        return self._ticket(record)

    async def wait(self, ticket: ApprovalTicket, timeout_s: float) -> ApprovalTicket:
        deadline = time.monotonic() + timeout_s
        while ticket.state == "pending" and time.monotonic() < deadline:
            await asyncio.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
            try:
                record = await self._settled(ticket.id)
            except StoreUnavailable:
                raise ApprovalUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None
            if record is None:
                raise ApprovalRefused("unknown", detail="approval record gone")
            ticket = self._ticket(record)
        return ticket

    async def consume(self, ticket: ApprovalTicket, request_id: str) -> bool:
        try:
            return await self._store.consume(ticket.id, self._clock())
        except StoreUnavailable:
            raise ApprovalUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None

    def executed(self, ticket: ApprovalTicket, outcome: str, request_id: str) -> None:
        self._audit.emit("approval_executed", ticket.digest, outcome=outcome, request_id=request_id)

    # --- the pages -------------------------------------------------------------------------

    async def show(self, record_id: str, identity: BrowserIdentity) -> Shown:
        """The record for a person who may decide it (or see it: its caller); raises
        ``login_not_found``, ``approval_forbidden``, ``login_unavailable``."""
        try:
            record = await self._settled(record_id)
        except StoreUnavailable:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None
        if record is None:
            raise LoginNotFound(detail="approval record unknown or gone")
        body = RecordBody.decode(record.body)
        if not may_decide(body, identity):
            raise ApprovalForbidden(detail="not an approver of this request")
        return record, body, _digest(record)

    async def decide(self, record_id: str, identity: BrowserIdentity, approve: bool) -> Shown:
        """Approve or deny, once (across replicas); raises as :meth:`show`, and
        ``approval_closed`` when the record is no longer pending."""
        await self.show(record_id, identity)
        by = hashlib.sha256(f"{identity.issuer}\x00{identity.subject}".encode()).hexdigest()
        try:
            record, changed = await self._store.decide(record_id, approve, by, self._clock())
        except StoreUnavailable:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None
        if record is None:
            raise LoginNotFound(detail="approval record gone")
        if not changed:
            raise ApprovalClosed(detail=f"record is {record.state}")
        body = RecordBody.decode(record.body)
        self._audit.emit(
            "approval_approved" if approve else "approval_denied",
            _digest(record),
            tool=body.binding.tool,
            backend=body.binding.backend,
            approvers=record.approvers,
            issuer=identity.issuer,
            subject=identity.subject,
            preview_sha256=body.preview_sha256,
        )
        return record, body, _digest(record)

    async def waiting_for(self, identity: BrowserIdentity) -> list[Shown]:
        """The pending requests this person may decide: their own (``by: self``) and those of
        every approver set their sign-in's claims name (but not their own calls)."""
        sets = [_self_set_of(identity.issuer, identity.subject)]
        sets += [f"{claim}={value}" for claim, value in identity.claims]
        shown: list[Shown] = []
        try:
            for approvers in sets:
                for record in await self._store.pending_for(approvers, self._clock(), MAX_LISTED):
                    body = RecordBody.decode(record.body)
                    if may_decide(body, identity):
                        shown.append((record, body, _digest(record)))
        except StoreUnavailable:
            raise LoginUnavailable(retry_after=RETRY_AFTER_S, detail="store") from None
        return shown


def may_decide(body: RecordBody, identity: BrowserIdentity) -> bool:
    """The rule of the module docstring."""
    caller = (body.binding.issuer, body.binding.subject) == (identity.issuer, identity.subject)
    if body.rule.by == "self":
        return caller
    return not caller and identity.has_claim(body.rule.claim, body.rule.value)


def _self_set(binding: ApprovalBinding) -> str:
    return _self_set_of(binding.issuer, binding.subject)


def _self_set_of(issuer: str, subject: str) -> str:
    """The approver set of a caller's own requests: a digest, no name in the store."""
    return "self:" + hashlib.sha256(f"{issuer}\x00{subject}".encode()).hexdigest()
