"""Dashboards, alert rules and docs cannot drift from the metrics the gateway exports.

Every ``mcp_gateway_*`` name in ``deploy/prometheus/alerts.yml`` and
``deploy/grafana/mcp-gateway.json`` must be a sample name of :class:`Metrics`' registry, every
alert must link a runbook section that exists in ``docs/operations.md``, and every metric must
be documented there. With ``promtool`` installed (Debian package ``prometheus``), the config and
rules are also checked by Prometheus itself and the rule unit tests in
``deploy/prometheus/alerts_test.yml`` run.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.observability.group_metrics import GroupMetrics
from gateway.observability.metrics import Metrics

ROOT = Path(__file__).resolve().parents[3]
PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "mcp-gateway.json"
OPERATIONS = ROOT / "docs" / "operations.md"
METRIC = re.compile(r"\bmcp_gateway_[a-z0-9_]+")
PROMTOOL = shutil.which("promtool")

_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gauge": ("",),
    "info": ("_info",),
}


def families() -> list[Any]:
    """Every family a gateway exposes: a single process's, plus the supervisor's own series
    of ``serve --workers N`` (the group's /metrics has the same families otherwise)."""
    return [*Metrics().registry.collect(), *GroupMetrics(2, "0").registry.collect()]


def sample_names() -> set[str]:
    """Every sample name the registry can expose (``_created`` series are disabled)."""
    names: set[str] = set()
    for family in families():
        for suffix in _SUFFIXES[family.type]:
            names.add(family.name + suffix)
    return names


def alert_rules() -> list[dict[str, Any]]:
    document = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_panels() -> list[dict[str, Any]]:
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def dashboard_exprs() -> list[str]:
    return [target["expr"] for panel in dashboard_panels() for target in panel["targets"]]


def test_the_registry_has_the_names_the_checks_rely_on() -> None:
    names = sample_names()
    expected = {
        "mcp_gateway_requests_total",
        "mcp_gateway_build_info",
        "mcp_gateway_request_duration_seconds_bucket",
        "mcp_gateway_in_flight",
    }
    assert expected <= names


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda rule: rule["alert"])
def test_every_alert_uses_only_exported_metrics_and_links_its_runbook(rule: dict[str, Any]) -> None:
    used = set(METRIC.findall(rule["expr"]))
    assert used or rule["expr"].startswith("up{"), "alerts watch the gateway's metrics or `up`"
    assert used <= sample_names(), used - sample_names()
    assert rule["labels"]["severity"] in {"warning", "critical"}
    annotations = rule["annotations"]
    assert annotations["summary"] and annotations["description"]
    assert annotations["runbook"] == f"docs/operations.md#{rule['alert'].lower()}"
    assert re.search(rf"^### {rule['alert']}$", OPERATIONS.read_text(), re.MULTILINE)


def test_the_required_alerts_exist() -> None:
    names = {rule["alert"] for rule in alert_rules()}
    assert {
        "IssuerErrors",
        "High5xxRatio",
        "Saturation",
        "RateLimiting",
        "PolicyReloadFailures",
        "CatalogStale",
        "WorkerRestarts",
    } <= names


@pytest.mark.parametrize("expr", dashboard_exprs())
def test_every_dashboard_query_uses_only_exported_metrics(expr: str) -> None:
    used = set(METRIC.findall(expr))
    assert used and used <= sample_names(), used - sample_names()


def test_the_dashboard_is_importable_with_unique_panel_ids_and_a_datasource_variable() -> None:
    board = dashboard()
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    variables = {item["name"]: item for item in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for panel in dashboard_panels():
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"]
        position = panel["gridPos"]
        assert position["x"] + position["w"] <= 24


def backend_labelled_metrics() -> set[str]:
    """Sample names whose series carry a ``backend`` label (one registered backend)."""
    metrics = Metrics()
    metrics.catalog.register("docs")
    metrics.backend_requests_total.labels(backend="docs", tool="t", outcome="ok").inc()
    metrics.backend_duration_seconds.labels(backend="docs", tool="t").observe(0.1)
    return {
        sample.name
        for family in metrics.registry.collect()
        for sample in family.samples
        if "backend" in sample.labels
    }


def test_the_dashboard_filters_every_backend_query_by_a_backend_variable() -> None:
    variables = {item["name"]: item for item in dashboard()["templating"]["list"]}
    backend = variables["backend"]
    assert backend["type"] == "query" and backend["includeAll"] and backend["multi"]
    assert "backend)" in backend["definition"]
    labelled = backend_labelled_metrics()
    assert {"mcp_gateway_backend_requests_total", "mcp_gateway_catalog_age_seconds"} <= labelled
    for expr in dashboard_exprs():
        if set(METRIC.findall(expr)) & labelled:
            assert 'backend=~"$backend"' in expr, expr


def test_the_latency_panels_show_exemplars_that_link_to_the_trace() -> None:
    # The gateway labels its duration exemplars trace_id (gateway/http/pipeline/endpoint.py); the
    # provisioned Prometheus data source turns that label into a link to the trace store.
    targets = [
        target
        for panel in dashboard()["panels"]
        for target in panel.get("targets", [])
        if "request_duration_seconds_bucket" in target["expr"]
    ]
    assert targets and all(target.get("exemplar") is True for target in targets)
    sources = yaml.safe_load((ROOT / "deploy" / "grafana" / "datasources.yaml").read_text())
    by_uid = {source["uid"]: source for source in sources["datasources"]}
    (link,) = by_uid["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert link["name"] == "trace_id"
    assert by_uid[link["datasourceUid"]]["type"] == "tempo"


def test_the_scrape_config_scrapes_the_ops_listener_and_loads_the_rules() -> None:
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]
    (job,) = [job for job in config["scrape_configs"] if job["job_name"] == "mcp-gateway"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["gateway:9090"]


def test_every_metric_is_documented_in_the_operations_guide() -> None:
    text = OPERATIONS.read_text()
    exposed = families()
    for family in exposed:
        documented = {family.name} | {family.name + suffix for suffix in _SUFFIXES[family.type]}
        assert any(f"`{name}`" in text for name in documented), family.name
    assert "mcp_gateway_workers" in {family.name for family in exposed}


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (Debian: prometheus)")
class TestWithPromtool:
    def run(self, *args: str) -> None:
        assert PROMTOOL is not None
        done = subprocess.run(
            [PROMTOOL, *args],
            check=False,
            cwd=PROMETHEUS,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def test_the_scrape_config_is_valid(self) -> None:
        self.run("check", "config", "prometheus.yml")

    def test_the_alert_rules_are_valid(self) -> None:
        self.run("check", "rules", "alerts.yml")

    def test_the_alert_rule_unit_tests_pass(self) -> None:
        self.run("test", "rules", "alerts_test.yml")

    def test_every_dashboard_query_is_valid_promql(self, tmp_path: Path) -> None:
        rules = []
        for index, expr in enumerate(dashboard_exprs()):
            concrete = (
                expr.replace("$__rate_interval", "5m")
                .replace("$__range", "1h")
                .replace("$job", ".*")
                .replace("$instance", ".*")
            )
            rules.append({"record": f"dashboard:query_{index}", "expr": concrete})
        path = tmp_path / "dashboard_rules.yml"
        path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
        self.run("check", "rules", str(path))
