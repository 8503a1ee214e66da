"""The OAuth resource server's rows (RFC 6750 §3, RFC 9728 §5.1, RFC 9449): no, invalid or
unbound credentials, missing scopes, and an issuer that cannot answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.errors._base import (
    BAD_REQUEST_CODE,
    FORBIDDEN_CODE,
    UNAUTHORIZED_CODE,
    GatewayError,
)

__all__ = [
    "DpopReplayUnavailable",
    "DpopRequired",
    "DpopTokenAsBearer",
    "GroupsOverage",
    "InsufficientScope",
    "InvalidDpopProof",
    "InvalidToken",
    "IssuerUnavailable",
    "NoCredentials",
    "RevocationUnavailable",
    "TokenInQuery",
    "ToolInsufficientScope",
    "UseDpopNonce",
]

_MAX_LISTED_SCOPES = 8
"""Scopes named in a 401/403 message; the full lists are in ``data``."""


class TokenInQuery(GatewayError):
    row, status, message = "token_in_query", 400, "Access tokens are accepted only in the header"
    oauth_error = "invalid_request"
    challenge = True
    body_code = BAD_REQUEST_CODE


def _scope_list(scopes: tuple[str, ...]) -> str:
    named = " ".join(scopes[:_MAX_LISTED_SCOPES])
    return named + (" …" if len(scopes) > _MAX_LISTED_SCOPES else "")


class _AuthBody(GatewayError):
    """401/403 rows: a JSON-RPC error body naming the scopes (the Python SDK and FastMCP show
    a non-2xx body only when it is a JSON-RPC error). ``scopes`` are the policy's, never input."""

    challenge = True

    def body_data(self) -> Mapping[str, Any] | None:
        return {"required_scopes": list(self.scopes)}


class NoCredentials(_AuthBody):
    row, status, message = "no_credentials", 401, "Authentication required"
    body_code = UNAUTHORIZED_CODE

    def body_message(self) -> str:
        if not self.scopes:
            return self.message
        return f"{self.message}: send an OAuth access token with scope {_scope_list(self.scopes)}"


class InvalidToken(_AuthBody):
    row, status, message = "invalid_token", 401, "Invalid or expired access token"
    oauth_error = "invalid_token"
    body_code = UNAUTHORIZED_CODE


class InvalidDpopProof(InvalidToken):
    """The request's DPoP proof (RFC 9449 §4.3) is missing, repeated or fails a check; which
    one is ``reason`` (a bounded metrics label) and ``detail`` (logs), never the proof. The
    challenge is ``DPoP error="invalid_dpop_proof"`` (§7.1)."""

    row, message = "invalid_dpop_proof", "Invalid DPoP proof"
    oauth_error = "invalid_dpop_proof"

    def __init__(self, *, reason: str = "malformed", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason


class UseDpopNonce(InvalidDpopProof):
    """The issuer's ``dpop.nonce`` is on and the proof has no nonce, or an old or foreign one
    (RFC 9449 §8, §9): answered with a fresh ``DPoP-Nonce`` to sign into the retry."""

    row, message = "use_dpop_nonce", "DPoP nonce required"
    oauth_error = "use_dpop_nonce"

    def __init__(self, *, nonce: str = "", **kwargs: Any) -> None:
        kwargs.setdefault("reason", "nonce")
        super().__init__(**kwargs)
        self.nonce = nonce
        """The nonce the client must use (the ``DPoP-Nonce`` response header)."""


class DpopTokenAsBearer(InvalidToken):
    """A DPoP-bound token (``cnf.jkt``) presented with the ``Bearer`` scheme: refused, or a
    thief holding only the token would skip the proof (RFC 9449 §7.2 downgrade)."""

    row, message = "dpop_token_as_bearer", "This access token must be used with a DPoP proof"


class DpopRequired(InvalidToken):
    """A bearer (unbound) token of an issuer with ``dpop: required``."""

    row, message = "dpop_required", "A DPoP-bound access token is required"


class GroupsOverage(InvalidToken):
    """The issuer left the token's groups out (Entra ID group overage: ``_claim_names`` names
    the groups claim, or ``hasgroups: true``) while this issuer's ``groups`` feed the policy.
    Refused: reading "no groups" would decide on a partial identity."""

    row, message = "groups_overage", "The access token does not carry its groups (group overage)"


class InsufficientScope(_AuthBody):
    """The token lacks the baseline scopes every MCP request needs."""

    row, status, message = "insufficient_scope", 403, "Insufficient scope"
    oauth_error = "insufficient_scope"
    body_code = FORBIDDEN_CODE

    def __init__(self, *, missing: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.missing = missing
        """The scopes the token lacks (a subset of ``scopes``, which lists every one needed)."""

    def body_message(self) -> str:
        lacking = self.missing or self.scopes
        return f"Insufficient scope: requires {_scope_list(lacking)}" if lacking else self.message

    def body_data(self) -> Mapping[str, Any] | None:
        return {"required_scopes": list(self.scopes), "missing_scopes": list(self.missing)}


class ToolInsufficientScope(InsufficientScope):
    """The policy would allow this tool with more scopes (step-up, MCP 2025-11-25+ §Scope)."""

    row = "tool_insufficient_scope"


class IssuerUnavailable(GatewayError):
    """The issuer could not answer; never an anonymous fallback (fail closed)."""

    row, status, message = (
        "issuer_unavailable",
        503,
        "Authorization server unavailable, retry later",
    )
    # RFC 6750 §3.1 has no "temporarily unavailable" code for resource servers; we send a
    # challenge without error= (like NoCredentials) and rely on 503 + Retry-After. See docs.
    challenge = True


class RevocationUnavailable(IssuerUnavailable):
    """The shared revocation list could not be checked for a token that is not cached, and
    ``state.on_store_error.revocation`` is ``deny`` (fail closed). Same answer as
    ``issuer_unavailable`` for the client; its own row for operators."""

    row = "revocation_unavailable"


class DpopReplayUnavailable(IssuerUnavailable):
    """The shared store could not say whether a DPoP proof was used before, and
    ``state.on_store_error.dpop_replay`` is ``deny`` (the default: fail closed)."""

    row = "dpop_replay_unavailable"
