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

from dataclasses import dataclass

from gateway.auth.claims import MAX_IDENTITY_CHARS
from gateway.seams import Principal
from gateway.state.browser_records import owner_digest

__all__ = ["MAX_IDENTITY_CHARS", "BrowserIdentity", "same_person"]


@dataclass(frozen=True, slots=True)
class BrowserIdentity:
    """The person signed in at the login surface."""

    issuer: str
    """The trusted issuer's ``url`` (exactly as configured, as a principal's ``issuer``)."""
    subject: str
    """At most :data:`MAX_IDENTITY_CHARS`, as a principal's (a longer claim is refused)."""

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
