"""``approvals:``, typed: how a call a policy rule holds for a person's approval is approved
(docs/policy.md#approvals). Built by :mod:`gateway.config.approval_settings`.

The section is optional: a rule's ``approval:`` works with these defaults, and needs ``login:``
(the approval page is on the login surface) and ``input_requests`` with ``seal_keys``."""

from dataclasses import dataclass
from typing import Annotated

from gateway.config.backend_model import CredentialConfig
from gateway.config.declare import Key

__all__ = ["ApprovalWebhookConfig", "ApprovalsConfig"]

_CLAIM = Key(pattern="^[A-Za-z0-9_.:-]{1,64}$", message="is not a claim name")


@dataclass(frozen=True, slots=True)
class ApprovalWebhookConfig:
    """``approvals.webhook``: a generic JSON POST for each approval request a set of approvers
    (``by:`` claims) is asked for: the page's URL, the tool, the backend, the approver set,
    the preview's hash and the expiry; never the arguments."""

    url: Annotated[str, Key(required=True, min_length=1)]
    """https, or plain http to a loopback or private address with ``allow_insecure_http``."""
    allow_insecure_http: bool = False
    credential: Annotated[CredentialConfig | None, Key(schema={"$ref": "#/$defs/credential"})] = (
        None
    )
    """The gateway's own service credential at the webhook, the shape of a backend's
    (``bearer`` or ``client_credentials``; never the caller's token)."""
    timeout_s: Annotated[float, Key(exclusive_minimum=0, maximum=30)] = 3.0
    """One POST's deadline; a webhook that fails is logged and counted, the request stands."""


@dataclass(frozen=True, slots=True)
class ApprovalsConfig:
    """``approvals:``: settings of the approvals policy rules ask for (``approval:``)."""

    approver_claims: Annotated[
        tuple[str, ...], Key(max_items=8, unique_items=True, items=_CLAIM)
    ] = ("groups",)
    """Claims of the ID token kept in the login session (string or list of strings, at most
    16 values of 128 characters): what ``approval.by: {claim, value}`` compares."""
    wait_s: Annotated[float, Key(minimum=0, maximum=60)] = 20.0
    """How long the retry of an approval round (a client retries once the person opened the
    link) waits for the decision, within the request's deadline, before it is asked again."""
    webhook: ApprovalWebhookConfig | None = None
    """Tell approvers about a request waiting for them (``by:`` claims only)."""
