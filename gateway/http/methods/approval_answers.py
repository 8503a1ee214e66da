"""A ``tools/call`` whose rule holds it for a person's approval (``approval:``,
docs/policy.md#approvals): the record bound to this exact call, and what the caller is told
until it is approved, in the form their client can follow (the consent answers' forms,
:mod:`.consent_answers`).

* **2026-07-28, ``elicitation.url`` declared**: an input-required result whose one input
  request is a URL elicitation to the approval page, with a sealed ``requestState`` that names
  the record (:meth:`~gateway.http.methods.input_rounds.InputRounds.consent_round`). The retry
  runs the call only when that record is for this very call (caller, backend, tool, arguments,
  policy version, catalog pin) and approved; it waits up to ``approvals.wait_s`` for the
  decision (a client retries once the person agreed to open the link), then asks again; a
  declined or cancelled round is a tool error (the record stays for the same call). The
  answer's content is never evidence: a form-mode answer (``content``) is ``approval_refused``.
* **2025-11-25**: ``approval_required`` (``-32042``) with that URL elicitation.
* **Every other client**: a tool error naming the page; the same call, made again once it is
  approved, finds the approved record by its binding and runs.

An approved record is consumed (once, across replicas) just before the call goes upstream;
denied, used, expired or another call's record is ``approval_refused``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from typing import Any, Final

from gateway.config import Config
from gateway.errors import ApprovalRefused, ApprovalRequired, ApprovalUnavailable
from gateway.http.methods.consent_answers import URL_ELICITATION_VERSION, declares_url_elicitation
from gateway.http.methods.input_rounds import APPROVAL_KEY, InputRounds
from gateway.http.turn import Turn
from gateway.jsonkit.write import canonical
from gateway.protocol.messages import McpMessage
from gateway.protocol.results import shape_call_result, tool_error_result
from gateway.protocol.sealed_state import arguments_digest
from gateway.seams import (
    ApprovalBinding,
    ApprovalRule,
    Approvals,
    ApprovalTicket,
    HeldCall,
    Resume,
    ToolDef,
)

__all__ = ["APPROVAL_EXTRA", "ApprovalAnswers", "catalog_pin"]

APPROVAL_EXTRA: Final = "approval"
"""``RequestContext.extra`` key: the ticket of the approval the call consumed."""
ANSWER_MARGIN_S: Final = 1.0
_REFUSED: Final[Mapping[str, str]] = {
    "denied": "denied",
    "consumed": "used",
    "expired": "expired",
    "missing": "unknown",
}


def catalog_pin(tool: ToolDef) -> str:
    """SHA-256 (hex) of the tool's definition as the catalog serves it (the guardrails'
    ``catalogPin``)."""
    return hashlib.sha256(canonical(dict(tool.definition))).hexdigest()


class ApprovalAnswers:
    """The answers of the module docstring (``approvals`` None: no approval page)."""

    def __init__(self, approvals: Approvals | None, inputs: InputRounds, config: Config) -> None:
        self._approvals = approvals
        self._inputs = inputs
        self._server = config.server
        self._wait_s = config.approvals.wait_s

    async def hold(
        self,
        rule: ApprovalRule,
        message: McpMessage,
        turn: Turn,
        tool: ToolDef,
        resume: Resume | None,
    ) -> dict[str, Any] | None:
        """None: the call's approval is consumed, run it (its ticket in ``ctx.extra``). Else
        the answer to send; raises ``approval_required``, ``approval_refused``,
        ``approval_unavailable``."""
        approvals = self._approvals
        if approvals is None:
            raise ApprovalUnavailable(retry_after=2, detail="no approval page (login:)")
        ctx, principal = turn.ctx, turn.principal
        binding = ApprovalBinding(
            issuer=principal.issuer,
            subject=principal.subject,
            client_id=principal.client_id,
            backend=tool.backend,
            tool=tool.name,
            arguments=arguments_digest(message.arguments or {}),
            policy_version=turn.policy.version,
            catalog_pin=catalog_pin(tool),
        )
        if resume is not None and resume.approval is not None:
            answer = (resume.responses or {}).get(APPROVAL_KEY)
            if isinstance(answer, Mapping) and "content" in answer:
                ctx.outcome = "approval_refused"
                raise ApprovalRefused("form_answer", detail="a form answer is no approval")
            ticket = await approvals.find(resume.approval, binding)
            action = answer.get("action") if isinstance(answer, Mapping) else None
            if ticket.state == "pending" and action != "accept":  # declined or cancelled
                ctx.outcome = "input_refused"
                result = tool_error_result(f"The call of {tool.name} was not approved.")
                return shape_call_result(result, era=message.era, server=self._server)
            if ticket.state == "pending":
                timeout = min(self._wait_s, turn.deadline - time.monotonic() - ANSWER_MARGIN_S)
                if timeout > 0:
                    ticket = await approvals.wait(ticket, timeout)
        else:
            held = HeldCall(binding, rule, message.arguments or {})
            ticket = await approvals.request(held, ctx.request_id)
        if ticket.state == "approved":
            if await approvals.consume(ticket, ctx.request_id):
                ctx.extra[APPROVAL_EXTRA] = ticket
                return None
            ticket = await approvals.find(ticket.id, binding)  # another request ran it
        if ticket.state != "pending":
            ctx.outcome = "approval_refused"
            raise ApprovalRefused(_REFUSED.get(ticket.state, "unknown"))
        return self._ask(ticket, message, turn, tool, resume)

    def executed(self, turn: Turn) -> None:
        """After the approved call: audit ``approval_executed`` with its outcome."""
        ticket = turn.ctx.extra.pop(APPROVAL_EXTRA, None)
        if isinstance(ticket, ApprovalTicket) and self._approvals is not None:
            outcome = turn.ctx.outcome or "ok"
            self._approvals.executed(ticket, outcome, turn.ctx.request_id)

    def _ask(
        self,
        ticket: ApprovalTicket,
        message: McpMessage,
        turn: Turn,
        tool: ToolDef,
        resume: Resume | None,
    ) -> dict[str, Any]:
        text = f"The call of {tool.name} needs a person's approval"
        if message.era == "modern" and declares_url_elicitation(message.client_capabilities):
            shaped = self._inputs.consent_round(
                message,
                turn,
                url=ticket.url,
                text=f"{text}: open the link to approve or deny it, then continue.",
                backend=tool.backend,
                after=resume,
                approval=ticket.id,
            )
            if shaped is not None:
                return shaped
        elif message.era == "legacy" and message.version == URL_ELICITATION_VERSION:
            turn.ctx.outcome = "approval_required"
            elicitation = {
                "mode": "url",
                "elicitationId": ticket.digest[:32],
                "url": ticket.url,
                "message": f"{text}: open the link to approve or deny it, then call again.",
            }
            raise ApprovalRequired(data={"elicitations": [elicitation]})
        turn.ctx.outcome = "approval_required"
        result = tool_error_result(
            f"{text}. Approve it at {ticket.url} and call the tool again with the same arguments."
        )
        return shape_call_result(result, era=message.era, server=self._server)
