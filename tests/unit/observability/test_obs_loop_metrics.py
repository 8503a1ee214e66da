"""Series bound by :mod:`gateway.observability.loop_metrics` expose exactly what
prometheus-client's own children expose after the same updates (issue 48: no lock per update)."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from gateway.observability import loop_metrics
from gateway.observability.collectors import LATENCY_BUCKETS, Collectors
from gateway.observability.metrics import Metrics

OBSERVATIONS = (
    0.0,
    *LATENCY_BUCKETS,  # exactly on each bound: that bucket (le is <=)
    *(bound * 1.0001 for bound in LATENCY_BUCKETS),  # just above: the next one
    0.0003,
    31.0,
    1e300,
    math.inf,
    -1.0,
    math.nan,  # in no bucket, but in the sum
)


def _exposed(bind: bool) -> tuple[bytes, bytes]:
    registry = CollectorRegistry()
    make = Collectors(registry)
    counter = make.counter("calls_total", "calls", ("tool",))
    gauge = make.gauge("in_flight", "in flight")
    histogram = make.histogram("seconds", "durations", ("tool",))
    count, flight = counter.labels("echo"), gauge
    observed = histogram.labels("echo")
    if bind:
        count = loop_metrics.counter(count)  # type: ignore[assignment]
        flight = loop_metrics.gauge(flight)  # type: ignore[assignment]
        observed = loop_metrics.histogram(observed)  # type: ignore[assignment]
    for index, amount in enumerate(OBSERVATIONS):
        count.inc()
        flight.inc()
        if index % 3 == 0:
            flight.dec()
        observed.observe(amount)
    observed.observe(0.002, {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"})
    return generate_latest(registry), generate_openmetrics(registry)


def _without_exemplar_times(text: bytes) -> bytes:
    """An exemplar ends with the time of its observation: another number in each run."""
    lines = []
    for line in text.split(b"\n"):
        lines.append(line.rsplit(b" ", 1)[0] if b" # {" in line else line)
    return b"\n".join(lines)


def test_bound_series_expose_the_same_text_as_prometheus_client_children() -> None:
    plain_text, plain_open = _exposed(bind=False)
    bound_text, bound_open = _exposed(bind=True)
    assert bound_text == plain_text
    assert b'mcp_gateway_seconds_bucket{le="0.0005",tool="echo"} 4.0' in bound_text
    assert _without_exemplar_times(bound_open) == _without_exemplar_times(plain_open)
    assert b'trace_id="4bf92f3577b34da6a3ce929d0e0e4736"' in bound_open


def test_binding_keeps_what_was_counted_before_and_is_idempotent() -> None:
    metrics = Metrics()
    child = metrics.requests_total.labels("tools/call", "200", "allow")
    child.inc(2)
    value = loop_metrics.counter(child)
    assert value.get() == 2.0
    assert (
        loop_metrics.counter(metrics.requests_total.labels("tools/call", "200", "allow")) is value
    )
    value.inc()
    child.inc()  # the child itself still works, on the same value
    assert value.get() == 4.0
    seconds = metrics.request_duration_seconds.labels("tools/call")
    seconds.observe(0.003)
    bound = loop_metrics.histogram(seconds)
    bound.observe(0.003)
    again = loop_metrics.histogram(metrics.request_duration_seconds.labels("tools/call"))
    again.observe(0.003)
    text = generate_latest(metrics.registry)
    assert (
        b'mcp_gateway_request_duration_seconds_bucket{le="0.005",method="tools/call"} 3.0' in text
    )
    assert b'mcp_gateway_request_duration_seconds_count{method="tools/call"} 3.0' in text
