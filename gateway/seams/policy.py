"""What a caller may do: the policy's :class:`Decision`, the :class:`Policy` and
:class:`PolicySource` Protocols (``gateway/policy``) and the external decision point
(``gateway/pdp``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from gateway.seams.approvals import ApprovalRule
from gateway.seams.callers import Principal
from gateway.seams.questions import AccessQuestion

if TYPE_CHECKING:
    from gateway.seams.requests import Asking

__all__ = [
    "Decision",
    "DecisionPoint",
    "Listing",
    "Policy",
    "PolicySource",
    "listed",
]

Listing = Literal["allowed", "step_up"]
"""Policy ``listing``: which tools ``tools/list`` shows (docs/policy.md)."""


# --- policy ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one policy evaluation, with what an audit line and `explain` need."""

    allowed: bool
    visible: bool
    """False when the tool must be answered as unknown (no rule, deny, client/subject rules)."""
    rule: str | None
    """The matched rule's key (exact name or glob), or None."""
    required_scopes: tuple[str, ...] = ()
    """Every scope the operation needs, baseline included (for the 403 challenge)."""
    missing_scopes: tuple[str, ...] = ()
    reason: str = ""
    granted_scopes: tuple[str, ...] = ()
    """The caller's scopes the decision rested on, in the policy's vocabulary (after each
    issuer's ``scope_map``): every required scope it holds, or for one it holds only through
    ``scope_hierarchy``, the granted scope that implies it. The audit trail records them."""
    detail: str = ""
    """For the log only, never the client: why a ``when:`` condition could not be evaluated."""
    guardrails: tuple[str, ...] = ()
    """On an allow: the processors (``guardrails:`` names) the rule shows its content to, in
    order (docs/policy.md#guardrails)."""
    approval: ApprovalRule | None = None
    """On an allow: the rule's ``approval:`` (the call runs once a person approved it,
    docs/policy.md#approvals); None: no approval needed."""


class Policy(Protocol):
    """**Protocol:** one loaded, immutable policy set."""

    version: str
    baseline_scopes: tuple[str, ...]
    listing: Listing
    """``allowed``: ``tools/list`` shows callable tools only; ``step_up``: also the visible tools
    the caller could call with more scopes (so clients reach the 403 step-up)."""

    def decide_tool(self, principal: Principal, tool: str) -> Decision: ...

    def decide_conditions(
        self, principal: Principal, question: AccessQuestion, client_ip: str = ""
    ) -> Decision | None:
        """The ``when:`` conditions of the rule governing ``question.target`` in its section
        (call after the ladder allowed): None when they all hold (or there are none), else a
        refusal. ``question.arguments=None`` (a listing): only the conditions that do not read
        ``arguments`` are decided (docs/policy.md#conditions). ``client_ip``: ``request.ip``."""
        ...

    def decide_method(self, principal: Principal, method: str) -> Decision:
        """Extra per-method scopes (``server/discover``, ``tools/list``); baseline included."""
        ...

    def rate_limit(self, tool: str) -> tuple[int, float] | None:
        """(count, per_seconds) per subject for this tool, if the rule sets one."""
        ...

    def max_concurrency(self, tool: str) -> int | None: ...

    def allows_tasks(self, tool: str) -> bool:
        """The rule governing ``tool`` says ``tasks: true`` (a call may become a task)."""
        ...

    def decide_prompt(self, principal: Principal, prompt: str) -> Decision:
        """``prompts:`` rules; a hidden prompt is answered as an unknown one (-32602)."""
        ...

    def resource_uri(self, uri: str) -> str | None:
        """The one spelling of a resource URI a client sent that is decided on *and* forwarded
        (its RFC 3986 normal form, docs/policy.md#resources); None when it is not a URI (no rule
        governs it: not found). Raises ``AmbiguousResourceUri`` (-32602) when it has no single
        meaning (an encoded ``/``, a backslash, ``//``, ``..`` above the root, a control)."""
        ...

    def decide_resource(self, principal: Principal, uri: str) -> Decision:
        """``resources:`` rules on the URI's normal form; hidden = not found."""
        ...

    def decide_template(self, principal: Principal, uri_template: str) -> Decision:
        """Whether a resource template is listed and completed (reads decide per URI)."""
        ...

    def limits(
        self, section: str, rule_key: str | None
    ) -> tuple[tuple[int, float] | None, int | None]:
        """(rate_limit, max_concurrency) of the ``prompts``/``resources`` rule ``rule_key``."""
        ...


class PolicySource(Protocol):
    """**Protocol:** hands out the current policy; a reload swaps it atomically."""

    def current(self) -> Policy: ...


class DecisionPoint(Protocol):
    """**Protocol:** the external decision point (``policy_external:``, ``gateway/pdp``).

    Asked only after the local policy allowed, so it can only narrow. Wired only when
    configured: without the section the routes hold None and never call it."""

    async def consult(self, asking: Asking, question: AccessQuestion) -> None:
        """Return when ``asking``'s request may go on (allowed, or a failure under ``on_error:
        allow_local``); raise ExternalPolicyDenied or PolicyUnavailable otherwise. Records the
        outcome in ``asking.ctx.extra["pdp"]`` for the audit trail; asks by
        ``asking.deadline``."""
        ...


def listed(decision: Decision, listing: Listing) -> bool:
    """Whether ``tools/list`` shows a tool with this decision under the policy's ``listing``.

    ``step_up`` also lists the tools a caller could unlock with more scopes, so clients that only
    call listed tools (MCP Inspector) reach the 403 step-up. Hidden tools (no rule, deny,
    client/subject conditions) have ``visible=False`` and stay hidden either way.
    """
    return decision.allowed or (listing == "step_up" and decision.visible)
