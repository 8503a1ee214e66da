"""Human approval of one exact call (docs/policy.md#approvals): the MCP side's answers while a
call waits for, or cannot use, its approval, and the approval page's refusals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway.errors._base import FORBIDDEN_CODE, GatewayError
from gateway.errors._login_pages import LoginPageError

__all__ = [
    "APPROVAL_REFUSALS",
    "ApprovalClosed",
    "ApprovalForbidden",
    "ApprovalRefused",
    "ApprovalRequired",
    "ApprovalUnavailable",
]

APPROVAL_REFUSALS: Final = ("denied", "used", "changed", "expired", "unknown", "form_answer")
"""``data.reason`` of ``approval_refused``."""


class ApprovalRequired(GatewayError):
    """A 2025-11-25 client's ``tools/call`` needs a person's approval first: the spec's URL
    elicitation required error (``-32042``) with one URL elicitation to the approval page.
    Never on the 2026-07-28 path (an input-required result instead)."""

    row, jsonrpc_code = "approval_required", -32042
    status = legacy_status = 200
    message = "This call needs a person's approval: open the link, then call again"

    def body_data(self) -> Mapping[str, Any] | None:
        return self.data


class ApprovalRefused(GatewayError):
    """The call's approval cannot let it run: denied, already used (a replay), for another
    call (changed arguments, policy version or catalog pin), expired, unknown, or the answer
    to the approval round was a form (a client's own "approve?" is no approval). Nothing goes
    upstream. No challenge: more scopes would not change it."""

    row, status, message = "approval_refused", 403, "This call was not approved"
    body_code = batch_member_code = FORBIDDEN_CODE

    def __init__(self, reason: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason if reason in APPROVAL_REFUSALS else "unknown"

    def body_data(self) -> Mapping[str, Any] | None:
        return {"reason": self.reason}


class ApprovalUnavailable(GatewayError):
    """A call that needs approval cannot be held for it now: the shared store did not answer,
    or the gateway has no approval page (no ``login:``). Fail closed: nothing goes upstream."""

    row, status = "approval_unavailable", 503
    message = "Approvals are unavailable right now, retry later"
    batch_member_code = -32603


class ApprovalForbidden(LoginPageError):
    """The signed-in person may not decide this request: a ``by: self`` request of another
    caller, or an approver set whose claim their sign-in does not carry. Nothing changes."""

    row, status = "approval_forbidden", 403
    message = "You may not decide this request. Sign out, then sign in as an approver."
    page_title = "Approval"


class ApprovalClosed(LoginPageError):
    """A decision posted for a request that is no longer waiting: decided already (by this
    person or another, at any replica), expired, or used."""

    row, status = "approval_closed", 409
    message = "This request is no longer waiting for a decision."
    page_title = "Approval"
