"""What the method families of one endpoint share, built once by the dispatcher
(:class:`~gateway.http.pipeline.dispatch.Dispatcher`)."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import Config
from gateway.http.call_limits import CallLimits
from gateway.http.condition_gate import ConditionGate
from gateway.http.guard_gate import GuardGate
from gateway.observability.metrics import Metrics
from gateway.seams import Backend, DecisionPoint

__all__ = ["RouteParts"]


@dataclass(frozen=True, slots=True)
class RouteParts:
    """The configuration, the backend and the checks every route that calls a backend uses."""

    config: Config
    backend: Backend
    limits: CallLimits
    conditions: ConditionGate
    """A rule's ``when:`` conditions, their error log and count."""
    guards: GuardGate
    """The processors of ``guardrails:`` (the gate refuses a rule naming one when none is
    configured)."""
    metrics: Metrics | None = None
    decision_point: DecisionPoint | None = None
    """``policy_external``: asked after everything local allowed (None: never asked)."""
