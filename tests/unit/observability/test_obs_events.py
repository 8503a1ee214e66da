"""policy_reload_reporter: one log line and the right counters per reload outcome."""

from __future__ import annotations

from dataclasses import dataclass

from structlog.testing import capture_logs

from gateway.observability.events import policy_reload_reporter
from gateway.observability.metrics import Metrics


@dataclass
class FakePolicy:
    version: str
    baseline_scopes: tuple[str, ...] = ("mcp:access",)


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_successful_reload_is_logged_counted_and_exports_its_version() -> None:
    metrics = Metrics()
    report = policy_reload_reporter(metrics)
    with capture_logs() as logs:
        report("success", FakePolicy("v2"), [])  # type: ignore[arg-type]
    assert logs == [{"event": "policy.reloaded", "version": "v2", "log_level": "info"}]
    assert value(metrics, "mcp_gateway_policy_reloads_total", result="success") == 1
    assert value(metrics, "mcp_gateway_policy_info", version="v2") == 1


def test_a_failed_reload_logs_its_problems_at_error_and_keeps_the_version() -> None:
    metrics = Metrics()
    report = policy_reload_reporter(metrics)
    report("success", FakePolicy("v1"), [])  # type: ignore[arg-type]
    problems = [f"policies/a.yaml:{n}:3: tools.x.scopes: not a list" for n in range(60)]
    with capture_logs() as logs:
        report("failure", None, problems)
    (line,) = logs
    assert (line["event"], line["log_level"], line["problem_count"]) == (
        "policy.reload_failed",
        "error",
        60,
    )
    assert line["problems"] == problems[:50]
    assert value(metrics, "mcp_gateway_policy_reloads_total", result="failure") == 1
    assert value(metrics, "mcp_gateway_policy_info", version="v1") == 1


def test_an_unchanged_poll_is_neither_logged_nor_counted() -> None:
    metrics = Metrics()
    with capture_logs() as logs:
        policy_reload_reporter(metrics)("unchanged", FakePolicy("v1"), [])  # type: ignore[arg-type]
    assert logs == []
    assert value(metrics, "mcp_gateway_policy_reloads_total", result="success") == 0
