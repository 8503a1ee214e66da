"""``approvals.webhook``: a generic JSON POST telling an approver set that a request waits for
them (docs/configuration.md#approvals). The message names the page, the tool, the backend, the
approver set, the preview's hash and the expiry; never the arguments or their preview. Sent in
the background through the one outbound HTTP client: a webhook that fails (unreachable, slow,
not 2xx) is logged (``approval.webhook_failed``) and the request stands."""

from __future__ import annotations

import asyncio
import time
from typing import Final, Protocol

from gateway.approvals.records import RecordBody
from gateway.config import ApprovalWebhookConfig
from gateway.jsonkit.write import compact
from gateway.observability.logging import get_logger
from gateway.outbound.client import Destination, Outbound
from gateway.outbound.failures import OutboundError
from gateway.seams import ApprovalTicket

__all__ = ["ApprovalWebhook"]

DESTINATION: Final = "approval-webhook"
MAX_IN_FLIGHT: Final = 64
_log = get_logger("gateway.approvals")


class ServiceToken(Protocol):
    """The gateway's credential at the webhook: a backend's service credential
    (``gateway.backend.credentials``), handed in by wiring."""

    async def token(self, deadline: float) -> str: ...


class ApprovalWebhook:
    def __init__(
        self,
        config: ApprovalWebhookConfig,
        outbound: Outbound,
        credential: ServiceToken | None = None,
    ) -> None:
        self._config = config
        self._outbound = outbound
        self._credential = credential
        outbound.add(Destination(DESTINATION, connect_timeout_s=config.timeout_s))
        self._sending: set[asyncio.Task[None]] = set()

    def notify(self, ticket: ApprovalTicket, body: RecordBody) -> None:
        """Post in the background (at most :data:`MAX_IN_FLIGHT` at once; past it dropped
        and logged)."""
        if len(self._sending) >= MAX_IN_FLIGHT:
            _log.warning("approval.webhook_failed", reason="busy", approval=ticket.digest[:32])
            return
        message = {
            "event": "approval_requested",
            "approval": ticket.digest[:32],
            "approvers": ticket.approvers,
            "tool": body.binding.tool,
            "backend": body.binding.backend,
            "url": ticket.url,
            "preview_sha256": body.preview_sha256,
            "expires_at": body.expires_at,
        }
        task = asyncio.get_running_loop().create_task(self._post(compact(message), ticket))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _post(self, payload: bytes, ticket: ApprovalTicket) -> None:
        headers = {"Content-Type": "application/json"}
        try:
            if self._credential is not None:
                deadline = time.monotonic() + self._config.timeout_s
                headers["Authorization"] = f"Bearer {await self._credential.token(deadline)}"
        except Exception:  # any failure to get it is the same failure
            _log.warning(
                "approval.webhook_failed", reason="credential", approval=ticket.digest[:32]
            )
            return
        try:
            response = await self._outbound.request(
                DESTINATION,
                "POST",
                self._config.url,
                timeout_s=self._config.timeout_s,
                headers=headers,
                body=payload,
                max_body=65_536,
            )
        except OutboundError as exc:
            _log.warning(
                "approval.webhook_failed", reason=type(exc).__name__, approval=ticket.digest[:32]
            )
            return
        if not 200 <= response.status < 300:
            _log.warning(
                "approval.webhook_failed",
                reason=f"status {response.status}",
                approval=ticket.digest[:32],
            )
