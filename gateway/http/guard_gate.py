"""The routes' side of ``guardrails:`` (docs/policy.md#guardrails): when the rule that allowed
a request names processors, its content is shown to them through the
:class:`~gateway.seams.Guardrails` seam, after everything local allowed.

Where: a ``tools/call``'s arguments before the backend gets them (after the expiry re-check
and the external decision point), the answers of an input-round retry (after its sealed state
was checked), the result of a ``tools/call`` the backend answered (a fixed-text tool error the
gateway made itself is not shown), a ``prompts/get`` or ``resources/read`` result. A rule
without ``guardrails`` costs one empty-tuple test.

A processor never widens what the policy allowed: changed arguments are checked again as the
caller's were (an argument the rule's ``override:`` fixes or hides may not be set:
``guardrail_denied`` with ``verdict: invalid``; the rule's ``when:`` conditions hold for the
arguments the backend will get, else ``condition_denied``), and only arguments may change, never
the tool. A refusal turns the request's decision into a denial (``reason: guardrail``) for the
access line, the metrics and the audit event.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.errors import GuardrailDenied
from gateway.http.condition_gate import ConditionGate
from gateway.http.turn import Turn
from gateway.seams import (
    AccessQuestion,
    Decision,
    GuardedCheck,
    GuardedContent,
    Guardrails,
    Resume,
    ToolDef,
)

__all__ = ["GuardGate", "Shown"]


@dataclass(frozen=True, slots=True)
class Shown:
    """What content is shown as: the check, the method, its target (a tool, prompt or URI) and
    the backend it goes to or came from; ``tool``: a ``tools/call``'s tool."""

    check: GuardedCheck
    method: str
    target: str
    backend: str
    tool: ToolDef | None = None

    @classmethod
    def of_tool(cls, check: GuardedCheck, tool: ToolDef, method: str = "tools/call") -> Shown:
        return cls(check, method, tool.name, tool.backend, tool)


class GuardGate:
    """Asks the configured processors (None: none configured, so a rule that names one is
    refused) for the routes; one per dispatcher."""

    def __init__(self, guardrails: Guardrails | None, conditions: ConditionGate) -> None:
        self._guardrails = guardrails
        self._conditions = conditions

    async def arguments(
        self, turn: Turn, decision: Decision, tool: ToolDef, arguments: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        """The caller's ``arguments`` as the processors changed them (None: unchanged),
        checked against the tool's rule again."""
        shown = Shown.of_tool("tool_arguments", tool)
        changed = await self._ask(turn, decision, shown, arguments)
        if changed is None:
            return None
        names = decision.guardrails
        if tool.closed_arguments and tool.refused_arguments(changed):
            self._refused(turn, decision)
            raise GuardrailDenied(guardrail=names[-1], verdict="invalid")
        final = tool.sent_arguments(changed)
        self._conditions.enforce(turn, AccessQuestion("tools/call", tool.name, tool.backend, final))
        return changed

    async def answers(
        self, turn: Turn, decision: Decision, tool: ToolDef, resume: Resume
    ) -> Resume:
        """A retry with each answer to an input request as the processors left it."""
        if not resume.responses:
            return resume
        kept: dict[str, Any] = {}
        for key, answer in resume.responses.items():
            shown = Shown.of_tool("input_answers", tool, resume.kinds.get(key, ""))
            changed = await self._ask(turn, decision, shown, answer)
            kept[key] = answer if changed is None else changed
        return dataclasses.replace(resume, responses=kept)

    async def result(
        self, turn: Turn, decision: Decision, shown: Shown, result: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        """``result`` as the processors left it (already checked for its kind)."""
        changed = await self._ask(turn, decision, shown, result)
        return result if changed is None else changed

    async def _ask(
        self, turn: Turn, decision: Decision, shown: Shown, content: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        names = decision.guardrails
        if self._guardrails is None:  # a rule names one, but none is configured: fail closed
            self._refused(turn, decision)
            raise GuardrailDenied(guardrail=names[0], verdict="unavailable")
        guarded = GuardedContent(
            check=shown.check,
            method=shown.method,
            target=shown.target,
            backend=shown.backend,
            content=content,
            policy_version=turn.policy.version,
            rule=decision.rule,
            tool=shown.tool,
        )
        try:
            return await self._guardrails.check(names, guarded, turn)
        except GuardrailDenied:
            self._refused(turn, decision)
            raise

    @staticmethod
    def _refused(turn: Turn, decision: Decision) -> None:
        # The audit trail's verdict: denied, and by what (a refused result: the call ran, its
        # answer was denied).
        turn.ctx.decision = dataclasses.replace(decision, allowed=False, reason="guardrail")
        turn.ctx.outcome = "denied"
