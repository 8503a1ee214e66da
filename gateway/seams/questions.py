"""What is asked about one request the scopes allowed (:class:`AccessQuestion`): the policy's
``when:`` conditions and the external decision point are asked the same value. Imports nothing
of the gateway, so the definitions that carry their own question (``ToolDef``, ``PromptDef``,
``ResourceDef``) may hold one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = ["ACTIONS", "SECTIONS", "AccessQuestion", "Action"]

Action = Literal["tools/call", "prompts/get", "resources/read"]
ACTIONS: Final[Mapping[str, Action]] = {
    "tools": "tools/call",
    "prompts": "prompts/get",
    "resources": "resources/read",
}
"""The action a question about a rule of each policy section asks."""
SECTIONS: Final[Mapping[str, str]] = {action: section for section, action in ACTIONS.items()}
"""The policy section whose rule governs a question's target, by its action."""


@dataclass(frozen=True, slots=True)
class AccessQuestion:
    """What is asked about one request the scopes allowed: built once, the same value goes to
    the rule's ``when:`` conditions (:meth:`Policy.decide_conditions`) and the external decision
    point (:meth:`DecisionPoint.consult`)."""

    action: Action
    target: str
    """The tool or prompt name as the caller sees it, or the resource URI (normal form)."""
    backend: str | None = None
    arguments: Mapping[str, Any] | None = None
    """The call's (schema-checked) arguments, sent to the decision point only with
    ``send_arguments``. None: none of the rule's kind (a listing, a completion, a task): only
    the conditions that do not read ``arguments`` are decided."""
