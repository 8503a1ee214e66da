"""The group's /metrics: the workers' families merged into one gateway's (group_metrics.py)."""

from __future__ import annotations

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

from gateway.observability.group_metrics import GAUGE_MERGE, GroupMetrics, parse_exposition
from gateway.observability.metrics import Metrics


def worker(
    *, in_flight: float = 0, tools: float = 3, age: float = 5.0, ready: bool = True
) -> Metrics:
    metrics = Metrics("1.2.3")
    metrics.set_catalog_names({"echo"})
    metrics.catalog.register("default", age=lambda: age, ready=lambda: ready)
    metrics.in_flight.set(in_flight)
    metrics.catalog.tools.labels(backend="default").set(tools)
    metrics.set_max_in_flight(256)
    metrics.set_policy_version("aaaa")
    return metrics


def scrape(metrics: Metrics) -> list:  # type: ignore[type-arg]
    """What the supervisor reads from a worker's socket: its OpenMetrics exposition."""
    return parse_exposition(openmetrics(metrics.registry).decode())


def value(group: GroupMetrics, sample: str) -> float:
    for line in generate_latest(group.registry).decode().splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{sample} not exposed")


def test_one_worker_is_exposed_exactly_as_it_exposes_itself() -> None:
    one = worker(in_flight=2)
    one.requests_total.labels("tools/call", "200", "allow").inc(7)
    one.request_duration_seconds.labels("tools/call").observe(0.003)
    one.backend_requests_total.labels("default", one.tool_label("echo"), "ok").inc(7)
    group = GroupMetrics(1, "1.2.3")
    group.update("101", scrape(one))
    own = generate_latest(one.registry).decode()
    merged = generate_latest(group.registry).decode()
    assert merged.startswith(own)  # then only the supervisor's own series
    tail = merged[len(own) :]
    assert {line.split()[2] for line in tail.splitlines() if line.startswith("# TYPE")} == {
        "mcp_gateway_workers",
        "mcp_gateway_workers_running",
        "mcp_gateway_worker_restarts_total",
    }


def test_counters_and_histograms_are_summed_and_each_gauge_follows_its_rule() -> None:
    a = worker(in_flight=3, tools=4, age=10.0)
    b = worker(in_flight=5, tools=0, age=2.0, ready=False)
    b.catalog.collisions.labels(backend="default").set(2)
    a.requests_total.labels("tools/call", "200", "allow").inc(2)
    b.requests_total.labels("tools/call", "200", "allow").inc(3)
    b.requests_total.labels("ping", "200", "none").inc()
    a.request_duration_seconds.labels("ping").observe(0.0007)
    b.request_duration_seconds.labels("ping").observe(0.2)
    b.state_store_up.set(0)
    b.record_policy_reload(False)
    b.set_policy_version("bbbb")
    group = GroupMetrics(2, "1.2.3")
    group.update("1", scrape(a))
    group.update("2", scrape(b))
    calls = 'mcp_gateway_requests_total{decision="allow",method="tools/call",status="200"}'
    assert value(group, calls) == 5
    assert (
        value(group, 'mcp_gateway_requests_total{decision="none",method="ping",status="200"}') == 1
    )
    ping = 'mcp_gateway_request_duration_seconds_bucket{le="0.001",method="ping"}'
    assert value(group, ping) == 1
    assert value(group, 'mcp_gateway_request_duration_seconds_count{method="ping"}') == 2
    assert value(group, 'mcp_gateway_request_duration_seconds_sum{method="ping"}') == pytest.approx(
        0.2007
    )
    assert value(group, "mcp_gateway_in_flight") == 8  # sum
    assert value(group, "mcp_gateway_max_in_flight") == 512  # sum: the group's capacity
    default = '{backend="default"}'
    assert value(group, "mcp_gateway_catalog_tools" + default) == 0  # min: one has no catalog
    assert value(group, "mcp_gateway_catalog_age_seconds" + default) == 10  # max: the stalest
    assert value(group, "mcp_gateway_backend_ready" + default) == 0  # min: not ready on one
    assert value(group, "mcp_gateway_catalog_collisions" + default) == 2  # max
    assert value(group, "mcp_gateway_state_store_up") == 0  # min
    assert value(group, "mcp_gateway_policy_last_reload_success") == 0  # min
    # Mid-reload both versions show (value 1 each), not 2.
    assert value(group, 'mcp_gateway_policy_info{version="aaaa"}') == 1
    assert value(group, 'mcp_gateway_policy_info{version="bbbb"}') == 1
    assert value(group, 'mcp_gateway_build_info{version="1.2.3"}') == 1
    assert value(group, "mcp_gateway_workers") == 2


def test_an_exited_workers_counters_stay_in_the_sum_and_its_gauges_leave() -> None:
    a, b = worker(in_flight=1), worker(in_flight=2)
    calls = 'mcp_gateway_requests_total{decision="allow",method="tools/call",status="200"}'
    a.requests_total.labels("tools/call", "200", "allow").inc(10)
    b.requests_total.labels("tools/call", "200", "allow").inc(4)
    a.request_duration_seconds.labels("ping").observe(0.01)
    group = GroupMetrics(2, "1.2.3")
    group.update("1", scrape(a))
    group.update("2", scrape(b))
    seen = [value(group, calls)]
    group.retire("1")  # worker 1 crashed; its replacement starts from zero
    seen.append(value(group, calls))
    c = worker(in_flight=0)
    group.update("3", scrape(c))
    seen.append(value(group, calls))
    c.requests_total.labels("tools/call", "200", "allow").inc(1)
    group.update("3", scrape(c))
    seen.append(value(group, calls))
    assert seen == [14, 14, 14, 15]  # never down: Prometheus sees no counter reset
    assert value(group, 'mcp_gateway_request_duration_seconds_count{method="ping"}') == 1
    assert value(group, "mcp_gateway_in_flight") == 2  # only the live workers'
    assert value(group, "mcp_gateway_max_in_flight") == 512
    group.retire("2")
    group.retire("3")
    assert value(group, calls) == 15
    group.retire("unknown")  # a worker that died before its first scrape


def test_the_supervisors_own_listener_counts_join_the_sum_but_not_its_gauges() -> None:
    group = GroupMetrics(2, "1.2.3")
    group.update("1", scrape(worker(tools=7)))
    group.listener.rejections_total.labels("over_capacity").inc()
    assert value(group, 'mcp_gateway_rejections_total{row="over_capacity"}') == 1
    # The listener's own (unregistered backend) gauges are not a worker's.
    assert value(group, 'mcp_gateway_catalog_tools{backend="default"}') == 7


def test_every_gauge_has_a_merge_rule() -> None:
    gauges = {family.name for family in Metrics().registry.collect() if family.type == "gauge"}
    assert gauges == set(GAUGE_MERGE)


def test_a_malformed_exposition_is_refused() -> None:
    with pytest.raises(ValueError):
        parse_exposition("mcp_gateway_in_flight{ 1\n")
