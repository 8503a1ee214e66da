"""Metrics: fixed vocabularies exist from the start, helpers keep labels bounded, exposition."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.errors import all_rows
from gateway.observability.metric_labels import (
    CATALOG_REFRESH_RESULTS,
    INTROSPECTION_RESULTS,
    METHOD_LABELS,
    POLICY_RELOAD_RESULTS,
    RATE_LIMIT_SCOPES,
    TOKEN_CACHE_OUTCOMES,
    method_label,
)
from gateway.observability.metrics import Metrics, metrics_response_body


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


class TestFixedVocabularies:
    @pytest.mark.parametrize(
        ("name", "label", "values"),
        [
            ("mcp_gateway_introspection_total", "result", INTROSPECTION_RESULTS),
            ("mcp_gateway_token_cache_total", "outcome", TOKEN_CACHE_OUTCOMES),
            ("mcp_gateway_rate_limited_total", "scope", RATE_LIMIT_SCOPES),
            ("mcp_gateway_policy_reloads_total", "result", POLICY_RELOAD_RESULTS),
            ("mcp_gateway_rejections_total", "row", tuple(c.row for c in all_rows())),
        ],
    )
    def test_every_fixed_label_value_is_exported_at_zero_from_the_start(
        self, name: str, label: str, values: tuple[str, ...]
    ) -> None:
        metrics = Metrics()
        for item in values:
            assert value(metrics, name, **{label: item}) == 0.0

    def test_every_registered_backend_exports_its_series_from_the_start(self) -> None:
        metrics = Metrics()
        for name in ("docs", "tickets"):
            metrics.catalog.register(name)
        for name in ("docs", "tickets"):
            for result in CATALOG_REFRESH_RESULTS:
                assert (
                    value(metrics, "mcp_gateway_catalog_refresh_total", backend=name, result=result)
                    == 0.0
                )
            assert value(metrics, "mcp_gateway_catalog_collisions", backend=name) == 0.0
            assert value(metrics, "mcp_gateway_catalog_tools", backend=name) == 0.0
            assert value(metrics, "mcp_gateway_backend_ready", backend=name) == 0.0
        # Only configured names: nothing is created for a backend that was never registered.
        assert value(metrics, "mcp_gateway_catalog_tools", backend="other") is None

    def test_build_info_carries_the_version(self) -> None:
        assert value(Metrics("1.2.3"), "mcp_gateway_build_info", version="1.2.3") == 1.0

    def test_no_created_series_are_exported(self) -> None:
        body, _ = metrics_response_body(Metrics())
        assert b"_created" not in body


class TestHelpers:
    def test_only_catalog_names_are_tool_labels(self) -> None:
        metrics = Metrics()
        metrics.set_catalog_names(frozenset({"search_docs"}))
        assert metrics.tool_label("search_docs") == "search_docs"
        assert metrics.tool_label("../../etc/passwd") == "other"
        assert metrics.tool_label(None) == "other"

    def test_method_label_maps_notifications_and_unknown_methods(self) -> None:
        assert method_label("notifications/cancelled") == "notifications"
        assert method_label("notifications") == "other"
        assert method_label("tools/call") == "tools/call"
        assert method_label("Tools/Call") == "other"

    def test_every_client_method_the_gateway_serves_has_its_own_label(self) -> None:
        for method in (
            "subscriptions/listen",
            "resources/subscribe",
            "resources/unsubscribe",
            "prompts/get",
            "resources/read",
            "completion/complete",
        ):
            assert method_label(method) == method

    def test_the_metrics_reference_lists_every_method_label(self) -> None:
        docs = Path(__file__).resolve().parents[3] / "docs" / "operations.md"
        row = next(
            line
            for line in docs.read_text(encoding="utf-8").splitlines()
            if line.startswith("| `mcp_gateway_requests_total`")
        )
        listed = re.findall(r"`([a-z/]+)`", row.split("`method`:", 1)[1].split("`status`", 1)[0])
        assert tuple(listed) == METHOD_LABELS

    def test_the_catalog_age_counts_from_startup_until_a_fetch_reports(self) -> None:
        metrics = Metrics()
        metrics.catalog.register("default")
        age = value(metrics, "mcp_gateway_catalog_age_seconds", backend="default")
        assert age is not None and 0 <= age < 5
        metrics.catalog.register("default", age=lambda: 42.0)
        assert value(metrics, "mcp_gateway_catalog_age_seconds", backend="default") == 42.0

    def test_policy_reloads_count_results_and_export_one_version(self) -> None:
        metrics = Metrics()
        assert value(metrics, "mcp_gateway_policy_last_reload_success") == 1
        metrics.record_policy_reload(True, "v1")
        metrics.record_policy_reload(False)
        assert value(metrics, "mcp_gateway_policy_last_reload_success") == 0
        metrics.record_policy_reload(True, "v2")
        assert value(metrics, "mcp_gateway_policy_last_reload_success") == 1
        assert value(metrics, "mcp_gateway_policy_reloads_total", result="success") == 2
        assert value(metrics, "mcp_gateway_policy_reloads_total", result="failure") == 1
        assert value(metrics, "mcp_gateway_policy_info", version="v2") == 1
        assert value(metrics, "mcp_gateway_policy_info", version="v1") is None

    def test_the_in_flight_cap_is_exported_for_the_saturation_alert(self) -> None:
        metrics = Metrics()
        metrics.set_max_in_flight(256)
        assert value(metrics, "mcp_gateway_max_in_flight") == 256


class TestExposition:
    def test_a_plain_scrape_gets_the_prometheus_text_format(self) -> None:
        body, content_type = metrics_response_body(Metrics())
        assert content_type == "text/plain; version=0.0.4; charset=utf-8"
        assert b"# TYPE mcp_gateway_requests_total counter" in body

    def test_an_openmetrics_scrape_gets_openmetrics(self) -> None:
        body, content_type = metrics_response_body(
            Metrics(), "application/openmetrics-text; version=1.0.0"
        )
        assert content_type.startswith("application/openmetrics-text")
        assert body.endswith(b"# EOF\n")
