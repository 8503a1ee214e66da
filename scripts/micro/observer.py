"""Measure the observability hot path (figures in docs/performance.md, "Observability").

Run: ``.venv/bin/python scripts/bench_micro.py observer``. Not a test: timings are
printed, never asserted.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

from gateway.config import AuditConfig, LoggingConfig
from gateway.observability.access import GatewayObserver
from gateway.observability.audit import AuditSink
from gateway.observability.logging import configure, redact_secrets
from gateway.observability.metrics import Metrics
from gateway.observability.tracing import parse_traceparent, sanitize_tracestate, trace_context
from gateway.seams import Decision, Principal, RequestContext

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def best_us(fn: Callable[[], object], number: int) -> float:
    fn()
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def context() -> RequestContext:
    principal = Principal(
        "alice@example.com",
        "claude-code",
        frozenset({"mcp:access"}),
        time.time() + 3600,
        "https://id.example.com",
        "0123456789abcdef",
    )
    return RequestContext(
        request_id="9f0c7d1e2b3a4c5d6e7f8a9b0c1d2e3f",
        trace_id="4bf92f3577b34da6a3ce929d0e0e4736",
        span_id="00f067aa0ba902b7",
        started=time.monotonic(),
        client_ip="203.0.113.7",
        method="tools/call",
        tool="search_docs",
        era="modern",
        protocol_version="2026-07-28",
        principal=principal,
        decision=Decision(True, True, "search_docs"),
        status=200,
        outcome="ok",
        backend_ms=3.2,
        bytes_in=200,
        bytes_out=400,
    )


def observer_us(observer: GatewayObserver) -> float:
    ctx = context()

    def one() -> None:
        observer.request_started(ctx)
        observer.request_finished(ctx)

    return best_us(one, 20_000)


def main() -> None:
    with Path(os.devnull).open("w") as devnull, tempfile.TemporaryDirectory() as tmp:
        configure("json", "info", stream=devnull)
        metrics = Metrics()
        metrics.set_catalog_names({"search_docs"})
        plain, fingerprint = LoggingConfig(), LoggingConfig(subject="fingerprint")
        audit_file = AuditConfig(sink="file", path=str(Path(tmp) / "audit.log"), max_bytes=10**9)
        sink = AuditSink.from_config(audit_file)
        stdout_sink = AuditSink.from_config(AuditConfig(), stream=devnull)
        results = {
            "observer, audit to stdout (the default)": observer_us(
                GatewayObserver(metrics=metrics, logging_config=plain, audit=stdout_sink)
            ),
            "observer, audit off": observer_us(
                GatewayObserver(metrics=metrics, logging_config=plain, audit=None)
            ),
            "observer, subject fingerprint": observer_us(
                GatewayObserver(metrics=metrics, logging_config=fingerprint, audit=None)
            ),
            "observer, audit to a rotating file": observer_us(
                GatewayObserver(metrics=metrics, logging_config=plain, audit=sink)
            ),
            "observer, request metrics left to the endpoint": observer_us(
                GatewayObserver(
                    metrics=metrics,
                    logging_config=plain,
                    audit=None,
                    record_request_metrics=False,
                )
            ),
            "parse_traceparent (valid)": best_us(lambda: parse_traceparent(TRACEPARENT), 200_000),
            "trace_context (valid parent)": best_us(
                lambda: trace_context(TRACEPARENT, None), 200_000
            ),
            "trace_context (new trace)": best_us(lambda: trace_context(None, None), 200_000),
            "sanitize_tracestate (2 members)": best_us(
                lambda: sanitize_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"), 200_000
            ),
        }
        event = {f"field_{i}": "value" for i in range(22)} | {"event": "mcp.request"}
        results["redact_secrets (23-key event dict)"] = best_us(
            lambda: redact_secrets(None, "info", dict(event)), 50_000
        )
        sink.close()
    print(f"CPython {platform.python_version()} {platform.machine()}, {os.cpu_count()} cores")
    for name, micros in results.items():
        print(f"| {name} | {micros:.2f} µs |")


if __name__ == "__main__":
    main()
