"""Who is in the browser, and whether that is the MCP caller who started an action.

A signed-in browser is a :class:`BrowserIdentity`: the trusted issuer's ``url`` and the subject
*as that issuer entry derives it for MCP callers* (:attr:`IssuerConfig.subject_source
<gateway.config.IssuerConfig.subject_source>`: ``subject_claim`` for an issuer whose JWTs are
validated locally, else ``sub``). The ID token's claim of that name is read, so an issuer whose
``sub`` is pairwise per application (Microsoft Entra ID: the gateway's sign-in client and the MCP
resource are two applications) is compared on ``oid`` once the entry says ``subject_claim: oid``.

:func:`same_person` is the one answer to "is this browser the same person as this MCP
principal": same issuer, same subject, nothing else (no display name, no e-mail).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gateway.auth.claims import MAX_IDENTITY_CHARS
from gateway.seams import Principal
from gateway.state.browser_records import owner_digest

__all__ = [
    "MAX_CLAIM_VALUES",
    "MAX_IDENTITY_CHARS",
    "BrowserIdentity",
    "kept_claims",
    "same_person",
]

MAX_CLAIM_VALUES: Final = 16
"""Claim values a session keeps (``approvals.approver_claims``); the rest are dropped."""
MAX_CLAIM_CHARS: Final = 128
MAX_CLAIMS_TOTAL: Final = 1200
"""Characters of kept names and values together: the session cookie stays under 4 KiB."""


@dataclass(frozen=True, slots=True)
class BrowserIdentity:
    """The person signed in at the login surface."""

    issuer: str
    """The trusted issuer's ``url`` (exactly as configured, as a principal's ``issuer``)."""
    subject: str
    """At most :data:`MAX_IDENTITY_CHARS`, as a principal's (a longer claim is refused)."""
    claims: tuple[tuple[str, str], ...] = field(default=(), compare=False)
    """(claim, value) pairs of the sign-in kept for approver sets (``approvals.approver_claims``:
    docs/policy.md#approvals); never part of who the person is."""

    def has_claim(self, claim: str, value: str) -> bool:
        return (claim, value) in self.claims

    @classmethod
    def of(cls, principal: Principal) -> BrowserIdentity:
        """The identity an MCP principal has (what a pending action is bound to)."""
        return cls(principal.issuer, principal.subject)

    def owner(self) -> bytes:
        """A digest of (issuer, subject): what the shared store binds records to
        (:func:`~gateway.state.browser_records.owner_digest`)."""
        return owner_digest(self.issuer, self.subject)


def same_person(identity: BrowserIdentity, principal: Principal) -> bool:
    """Whether the signed-in browser is the MCP caller ``principal``: the same issuer and the
    same subject as that issuer entry derives it (module docstring)."""
    return identity.issuer == principal.issuer and identity.subject == principal.subject


def kept_claims(claims: Mapping[str, Any], names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The (claim, value) pairs of ``names`` in ``claims`` (a string or a list of strings each),
    at most :data:`MAX_CLAIM_VALUES` values of at most :data:`MAX_CLAIM_CHARS` characters, at
    most :data:`MAX_CLAIMS_TOTAL` characters in all (the first ones kept)."""
    kept: list[tuple[str, str]] = []
    for name in names:
        value = claims.get(name)
        values = [value] if isinstance(value, str) else value if isinstance(value, list) else []
        for item in values:
            if isinstance(item, str) and 0 < len(item) <= MAX_CLAIM_CHARS:
                kept.append((name, item))
    out: list[tuple[str, str]] = []
    total = 0
    for name, item in dict.fromkeys(kept):
        total += len(name) + len(item) + 8
        if len(out) == MAX_CLAIM_VALUES or total > MAX_CLAIMS_TOTAL:
            break
        out.append((name, item))
    return tuple(out)
