"""The policy's ``when:`` conditions at the front door: refuse a call, filter a listing, and
log and count a condition that cannot be evaluated.

A refusal is 403 ``condition_denied`` naming the rule, without a challenge: more scopes would
not help, so a client must not be sent into a step-up loop. Arguments larger than the
conditions may read are 400 ``condition_arguments_too_large`` (docs/policy.md#cost), before
any condition runs. A condition that cannot be evaluated
(a missing claim without ``has()``, a wrong type) refuses the same way, never allows and never
answers 500; it is logged once per (policy version, rule) with its reason, which names the
expression's position and never a value, and counted in
``mcp_gateway_policy_condition_errors_total{section,rule}`` on every occurrence.

Listing (``tools/list``, ``prompts/list``, ``resources/list``): a condition that does not read
``arguments`` is decided there (false or an error: the item is hidden, under either
``listing`` mode, since step-up would not help); one that reads ``arguments`` is decided when
the call arrives (docs/policy.md#conditions).
"""

from __future__ import annotations

from typing import Final

from gateway.errors import ConditionArgumentsTooLarge, ConditionDenied
from gateway.http.turn import Turn
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.seams import SECTIONS, AccessQuestion, Decision, Policy, Principal

__all__ = ["ConditionGate", "readable"]

_log = get_logger("gateway.http")
_LOGGED_MAX: Final = 1024
"""Rules whose condition error was logged (once per policy version and rule); bounded."""


def readable(
    policy: Policy, who: Principal, uri: str, *, backend: str = "", client_ip: str = ""
) -> bool:
    """Whether ``who`` may read ``uri``: the resource rule's scopes and its ``when:``
    conditions. For subscriptions (what a listen passes on, what ``resources/subscribe``
    accepts); a condition error there refuses without being counted or logged again (the
    reads and listings of the same rule count and log it)."""
    if not policy.decide_resource(who, uri).allowed:
        return False
    question = AccessQuestion("resources/read", uri, backend)
    return policy.decide_conditions(who, question, client_ip) is None


class ConditionGate:
    """Evaluates a rule's conditions for the routes; one per dispatcher."""

    def __init__(self, metrics: Metrics | None = None) -> None:
        self._metrics = metrics
        self._logged: set[tuple[str, str, str]] = set()

    def enforce(self, turn: Turn, question: AccessQuestion) -> None:
        """At the call, after the ladder allowed: raise ``condition_denied`` unless every
        condition of the rule governing ``question.target`` holds (its ``arguments`` None: a
        request that has no arguments of the rule's kind, such as a completion: the conditions
        that read none), ``condition_arguments_too_large`` when the arguments they read are over
        the bound."""
        refused = self._refused(turn, question)
        if refused is None:
            return
        turn.ctx.decision = refused
        if refused.reason == "arguments_too_large":
            raise ConditionArgumentsTooLarge(rule=refused.rule or question.target)
        raise ConditionDenied(rule=refused.rule or question.target)

    def listed(self, turn: Turn, question: AccessQuestion) -> bool:
        """At a listing (``question.arguments`` None): whether the conditions that can be
        decided without the call's arguments all hold (the others are decided at the call)."""
        return self._refused(turn, question) is None

    def _refused(self, turn: Turn, question: AccessQuestion) -> Decision | None:
        """The conditions' refusal, if any; one that could not be evaluated is counted (and
        logged once per policy version and rule)."""
        refused = turn.policy.decide_conditions(turn.principal, question, turn.ctx.client_ip)
        if refused is not None and refused.reason == "condition_error":
            self._errored(turn.policy.version, SECTIONS[question.action], refused)
        return refused

    def _errored(self, version: str, section: str, refused: Decision) -> None:
        rule = refused.rule or ""
        if self._metrics is not None:
            self._metrics.count_condition_error(section, rule)
        key = (version, section, rule)
        if key in self._logged:
            return
        if len(self._logged) >= _LOGGED_MAX:
            self._logged.clear()
        self._logged.add(key)
        _log.warning("condition_error", section=section, rule=rule, reason=refused.detail)
