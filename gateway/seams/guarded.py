"""Content processors a policy rule selects (``guardrails:``, ``gateway/guardrails``): what they
are shown (:class:`GuardedContent`) and the :class:`Guardrails` Protocol the routes call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from gateway.seams.backends import ToolDef

if TYPE_CHECKING:
    from gateway.seams.requests import Asking

__all__ = ["GUARDED_CHECKS", "GuardedCheck", "GuardedContent", "Guardrails"]

GuardedCheck = Literal[
    "tool_arguments", "tool_result", "input_answers", "prompt_result", "resource_result"
]
"""Where content is shown to a processor: a ``tools/call``'s arguments before the backend gets
them, its result, a user's answer to one of its input requests (a 2026-07-28 retry), a
``prompts/get`` result, a ``resources/read`` result."""
GUARDED_CHECKS: Final[tuple[GuardedCheck, ...]] = (
    "tool_arguments",
    "tool_result",
    "input_answers",
    "prompt_result",
    "resource_result",
)


@dataclass(frozen=True, slots=True)
class GuardedContent:
    """One piece of content on its way, as a processor is shown it."""

    check: GuardedCheck
    method: str
    """The MCP method it belongs to: ``tools/call``, ``prompts/get``, ``resources/read``, or
    for an answer the input request's (``elicitation/create``, ``sampling/createMessage``,
    ``roots/list``)."""
    target: str
    """The tool or prompt name as the caller sees it, or the resource URI (normal form)."""
    backend: str
    content: Mapping[str, Any]
    """The call's arguments (``tool_arguments``), the result (shaped as the backend layer
    checked it), or one answer."""
    policy_version: str
    rule: str | None = None
    """The key of the policy rule that selected the processors."""
    tool: ToolDef | None = None
    """The tool a ``tools/call``'s content belongs to: its ``inputSchema`` checks changed
    arguments; its definition's digest is the catalog pin the processor is shown."""


class Guardrails(Protocol):
    """**Protocol:** the named processors of ``guardrails:`` (``gateway/guardrails``).

    Wired only when configured: without the section the routes hold None and never call it,
    and a rule that names processors cannot be loaded (the policy loader checks the names)."""

    async def check(
        self, names: tuple[str, ...], content: GuardedContent, asking: Asking
    ) -> Mapping[str, Any] | None:
        """Show ``content`` to each processor of ``names`` that does ``content.check``, in
        order, each one the previous one's change. None when all passed it unchanged; else the
        changed content, already valid for its kind (arguments against the tool's
        ``inputSchema``, a result through the backend layer's result checks, an answer through
        the input-request answer checks). Raises ``GuardrailDenied``. Records each verdict (the
        processor, the check, the verdict; never content) in ``asking.ctx.extra
        ["guardrails"]``; asks by ``asking.deadline``."""
        ...
