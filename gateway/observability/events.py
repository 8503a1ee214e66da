"""Operational events that are not requests: policy reloads (log line + metrics).

The policy layer is pure (no logging, no metrics: ``gateway/policy/reload.py``); it reports each
reload to a callback. :func:`policy_reload_reporter` builds that callback, so the composition root
(``gateway/wiring/production.py``) wires ``PolicyReloader(paths,
on_reload=policy_reload_reporter(metrics))`` and every reload is logged and counted the same way.
The other lifecycle events (``gateway.started``, ``gateway.draining``, ``gateway.stopped``, catalog
refreshes, issuer errors) are logged by the layers that see them; ``docs/operations.md`` lists them
all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.seams import Policy

__all__ = ["MAX_REPORTED_PROBLEMS", "policy_reload_reporter"]

MAX_REPORTED_PROBLEMS: Final = 50
"""A broken policy set can produce hundreds of findings; one log line carries the first 50
(``mcp-gateway check`` prints them all)."""

_log = get_logger("gateway.policy")


def policy_reload_reporter(
    metrics: Metrics,
) -> Callable[[str, Policy | None, Sequence[str]], None]:
    """The ``on_reload(outcome, policy, problems)`` callback for the policy reloader.

    ``success``: ``policy.reloaded`` at INFO, ``policy_reloads_total{result="success"}`` and the
    new ``policy_info{version}``. ``failure``: ``policy.reload_failed`` at ERROR with the problems
    (file:line:col texts, never secrets) and ``policy_reloads_total{result="failure"}``; the
    running policy stays active. ``unchanged`` is neither logged nor counted. Safe to call from a
    worker thread (prometheus_client and the structlog writer are thread-safe).
    """

    def report(outcome: str, policy: Policy | None, problems: Sequence[str]) -> None:
        if outcome == "success" and policy is not None:
            metrics.record_policy_reload(True, policy.version)
            _log.info("policy.reloaded", version=policy.version)
        elif outcome == "failure":
            metrics.record_policy_reload(False)
            _log.error(
                "policy.reload_failed",
                problems=list(problems[:MAX_REPORTED_PROBLEMS]),
                problem_count=len(problems),
            )

    return report
