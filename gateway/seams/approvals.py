"""Human approval of one exact call as the layers see it (docs/policy.md#approvals): a tools
rule's ``approval:`` (:class:`ApprovalRule`, read by ``gateway/policy``), the call it holds
(:class:`ApprovalBinding`), and the :class:`Approvals` Protocol the front door
(``gateway/http``) asks and ``gateway/approvals`` implements on the shared store and the login
surface's pages."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

__all__ = [
    "DEFAULT_APPROVAL_TTL_S",
    "SELF",
    "ApprovalBinding",
    "ApprovalRule",
    "ApprovalState",
    "ApprovalTicket",
    "Approvals",
    "HeldCall",
]

SELF: Final = "self"
DEFAULT_APPROVAL_TTL_S: Final = 600
ApprovalState = Literal["pending", "approved", "denied", "expired", "consumed", "missing"]


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """A tools rule's ``approval:``: who approves, for how long a request stands, what the
    preview hides."""

    by: str = SELF
    """``self`` (the caller, signed in at the gateway's login) or ``claim`` (an approver set)."""
    claim: str = ""
    """With ``by: claim``: the ID token claim an approver's sign-in must carry ``value`` in."""
    value: str = ""
    ttl_s: int = DEFAULT_APPROVAL_TTL_S
    """How long the request may wait for a decision, and an approval for its call."""
    redact: tuple[str, ...] = ()
    """Argument names (dotted paths into objects) the preview shows as ``[redacted]``."""

    @property
    def approvers(self) -> str:
        """The approver set's key: ``self``, or ``<claim>=<value>``."""
        return SELF if self.by == SELF else f"{self.claim}={self.value}"


@dataclass(frozen=True, slots=True)
class ApprovalBinding:
    """Exactly what an approval is for: every field must match for the call to run."""

    issuer: str
    subject: str
    client_id: str | None
    backend: str
    tool: str
    arguments: str
    """SHA-256 of the arguments' canonical JSON (base64url), as a sealed state binds them."""
    policy_version: str
    catalog_pin: str
    """SHA-256 (hex) of the tool's definition as the catalog serves it."""


@dataclass(frozen=True, slots=True)
class HeldCall:
    """One call a rule holds until a person approves it: what a new request record is made of."""

    binding: ApprovalBinding
    rule: ApprovalRule
    arguments: Mapping[str, Any]
    """The caller's arguments (``binding.arguments`` is their digest); the page previews them
    with the rule's ``redact`` applied."""


@dataclass(frozen=True, slots=True)
class ApprovalTicket:
    """One approval record as the front door sees it."""

    id: str
    """The record id: the last path segment of its page (no credential: the page needs the
    right person's sign-in)."""
    url: str
    state: ApprovalState
    digest: str
    """The record's digest: what links its audit events."""
    approvers: str
    expires_at: float


class Approvals(Protocol):
    async def request(self, held: HeldCall, request_id: str) -> ApprovalTicket:
        """The live record of ``held.binding`` (pending or approved), else a new pending one
        (audited ``approval_requested``, approvers told by the webhook). A denied record is
        handed back once (then forgotten: the next call asks again). Raises
        ``ApprovalUnavailable``."""
        ...

    async def find(self, record_id: str, binding: ApprovalBinding) -> ApprovalTicket:
        """The record a retry's sealed state names, expired first when due; raises
        ``ApprovalRefused`` (``changed``) when it is not for ``binding``."""
        ...

    async def wait(self, ticket: ApprovalTicket, timeout_s: float) -> ApprovalTicket:
        """Wait at most ``timeout_s`` for a pending record's decision (any replica's)."""
        ...

    async def consume(self, ticket: ApprovalTicket, request_id: str) -> bool:
        """approved -> consumed, once across replicas; whether this call may run."""
        ...

    def executed(self, ticket: ApprovalTicket, outcome: str, request_id: str) -> None:
        """Audit ``approval_executed`` with the call's outcome."""
        ...
