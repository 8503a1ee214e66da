"""GatewayObserver: exact metric deltas, one access line per request, audit per tools/call."""

from __future__ import annotations

import contextvars
import hashlib
import io
import json
import os
import socket
import time
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from gateway.config import AuditConfig, LoggingConfig
from gateway.observability.access import ACCESS_EVENT, GatewayObserver, subject_fingerprint
from gateway.observability.audit import AuditSink
from gateway.observability.metrics import Metrics
from gateway.seams import Decision, Principal, RequestContext

TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXNlY3JldA"
FINGERPRINT = hashlib.sha256(TOKEN.encode()).hexdigest()[:16]


class Clock:
    """A settable monotonic clock so durations are exact."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def metrics() -> Metrics:
    m = Metrics("9.9.9")
    m.set_catalog_names({"search_docs", "create_ticket"})
    return m


@pytest.fixture
def audit_stream() -> io.StringIO:
    return io.StringIO()


def observer(
    metrics: Metrics,
    clock: Clock,
    audit_stream: io.StringIO | None = None,
    **logging: Any,
) -> GatewayObserver:
    sink = (
        AuditSink.from_config(AuditConfig(sink="stdout"), stream=audit_stream)
        if (audit_stream is not None)
        else None
    )
    return GatewayObserver(
        metrics=metrics,
        logging_config=LoggingConfig(**logging),
        audit=sink,
        clock=clock,
        wallclock=lambda: 1_796_000_000.0,
    )


def principal(subject: str = "alice@example.com") -> Principal:
    return Principal(
        subject=subject,
        client_id="claude-code",
        scopes=frozenset({"mcp:access", "docs:read"}),
        expires_at=time.time() + 300,
        issuer="https://id.example.com",
        fingerprint=FINGERPRINT,
    )


def context(clock: Clock, **fields: Any) -> RequestContext:
    base: dict[str, Any] = {
        "request_id": "req-1",
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "span_id": "00f067aa0ba902b7",
        "started": clock.now,
        "client_ip": "203.0.113.7",
    }
    base.update(fields)
    return RequestContext(**base)


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def tool_call(clock: Clock, **fields: Any) -> RequestContext:
    values: dict[str, Any] = {
        "method": "tools/call",
        "tool": "search_docs",
        "era": "modern",
        "protocol_version": "2026-07-28",
        "principal": principal(),
        "decision": Decision(
            allowed=True,
            visible=True,
            rule="search_docs",
            granted_scopes=("mcp:access", "docs:read"),
        ),
        "status": 200,
        "outcome": "ok",
        "backend_ms": 12.5,
        "bytes_in": 180,
        "bytes_out": 420,
    }
    values.update(fields)
    return context(clock, **values)


def denied_call(clock: Clock, rule: str) -> Any:
    """A ``tools/call create_ticket`` refused 403 by ``rule`` for want of ``tickets:write``."""
    denied = Decision(allowed=False, visible=True, rule=rule, missing_scopes=("tickets:write",))
    return tool_call(
        clock,
        tool="create_ticket",
        decision=denied,
        status=403,
        error_row="tool_insufficient_scope",
        outcome=None,
        backend_ms=None,
    )


def run(obs: GatewayObserver, ctx: RequestContext, clock: Clock, seconds: float = 0.05) -> None:
    obs.request_started(ctx)
    clock.now += seconds
    obs.request_finished(ctx)


@pytest.fixture
def logs() -> Iterator[list[MutableMapping[str, Any]]]:
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as captured:
        yield captured


class TestMetrics:
    def test_an_allowed_tool_call_counts_once_with_bounded_labels(
        self, metrics: Metrics, clock: Clock
    ) -> None:
        obs = observer(metrics, clock)
        run(obs, tool_call(clock), clock, 0.05)
        labels = {"method": "tools/call", "status": "200", "decision": "allow"}
        assert sample(metrics, "mcp_gateway_requests_total", **labels) == 1
        assert (
            sample(metrics, "mcp_gateway_request_duration_seconds_count", method="tools/call") == 1
        )
        assert sample(
            metrics, "mcp_gateway_request_duration_seconds_sum", method="tools/call"
        ) == pytest.approx(0.05)
        assert sample(metrics, "mcp_gateway_in_flight") == 0
        # Backend metrics are the backend layer's: the observer must not count them twice.
        assert (
            sample(metrics, "mcp_gateway_backend_requests_total", tool="search_docs", outcome="ok")
            == 0
        )

    def test_in_flight_rises_at_start_and_falls_at_finish(
        self, metrics: Metrics, clock: Clock
    ) -> None:
        obs = observer(metrics, clock)
        first, second = tool_call(clock), tool_call(clock, request_id="req-2")
        obs.request_started(first)
        obs.request_started(second)
        assert sample(metrics, "mcp_gateway_in_flight") == 2
        obs.request_finished(first)
        assert sample(metrics, "mcp_gateway_in_flight") == 1
        obs.request_finished(second)
        assert sample(metrics, "mcp_gateway_in_flight") == 0

    @pytest.mark.parametrize(
        ("method", "label"),
        [
            pytest.param("server/discover", "server/discover", id="server/discover"),
            pytest.param("initialize", "initialize", id="initialize"),
            pytest.param("ping", "ping", id="ping"),
            pytest.param("tools/list", "tools/list", id="tools/list"),
            pytest.param("notifications/initialized", "notifications", id="notifications/*"),
            pytest.param("logging/setLevel", "other", id="a method the gateway does not serve"),
            pytest.param("x" * 5000, "other", id="a 5000-char made-up method"),
            pytest.param(None, "other", id="refused before the body was decoded"),
        ],
    )
    def test_the_method_label_takes_only_its_fixed_values(
        self, metrics: Metrics, clock: Clock, method: str | None, label: str
    ) -> None:
        run(observer(metrics, clock), context(clock, method=method, status=200), clock)
        assert (
            sample(
                metrics, "mcp_gateway_requests_total", method=label, status="200", decision="none"
            )
            == 1
        )

    def test_a_rejection_counts_its_status_row_and_no_backend_call(
        self, metrics: Metrics, clock: Clock
    ) -> None:
        ctx = context(clock, status=401, error_row="invalid_token")
        run(observer(metrics, clock), ctx, clock)
        assert (
            sample(
                metrics, "mcp_gateway_requests_total", method="other", status="401", decision="none"
            )
            == 1
        )
        assert sample(metrics, "mcp_gateway_rejections_total", row="invalid_token") == 1
        assert sample(metrics, "mcp_gateway_rejections_total", row="no_credentials") == 0

    def test_an_unknown_row_name_is_labelled_other(self, metrics: Metrics, clock: Clock) -> None:
        run(observer(metrics, clock), context(clock, status=499, error_row="client_closed"), clock)
        assert sample(metrics, "mcp_gateway_rejections_total", row="other") == 1

    def test_a_policy_denial_is_labelled_deny(self, metrics: Metrics, clock: Clock) -> None:
        ctx = denied_call(clock, "create_ticket")
        run(observer(metrics, clock), ctx, clock)
        assert (
            sample(
                metrics,
                "mcp_gateway_requests_total",
                method="tools/call",
                status="403",
                decision="deny",
            )
            == 1
        )
        assert sample(metrics, "mcp_gateway_rejections_total", row="tool_insufficient_scope") == 1

    def test_request_metrics_can_be_left_to_the_endpoint(
        self, metrics: Metrics, clock: Clock
    ) -> None:
        obs = GatewayObserver(
            metrics=metrics,
            logging_config=LoggingConfig(),
            audit=None,
            record_request_metrics=False,
            clock=clock,
        )
        ctx = tool_call(clock)
        obs.request_started(ctx)
        assert sample(metrics, "mcp_gateway_in_flight") == 0
        obs.request_finished(ctx)
        assert (
            sample(
                metrics,
                "mcp_gateway_requests_total",
                method="tools/call",
                status="200",
                decision="allow",
            )
            == 0
        )
        assert (
            sample(metrics, "mcp_gateway_request_duration_seconds_count", method="tools/call") == 0
        )
        assert sample(metrics, "mcp_gateway_rejections_total", row="invalid_token") == 0


class TestAccessLine:
    def test_one_info_line_carries_every_documented_field(
        self, metrics: Metrics, clock: Clock, logs: list[MutableMapping[str, Any]]
    ) -> None:
        run(observer(metrics, clock), tool_call(clock, jsonrpc_code=None), clock, 0.0421)
        access = [line for line in logs if line["event"] == ACCESS_EVENT]
        assert len(access) == 1
        line = access[0]
        assert line["log_level"] == "info"
        assert {
            k: line[k]
            for k in (
                "request_id",
                "trace_id",
                "method",
                "tool",
                "protocol_version",
                "status",
                "jsonrpc_code",
                "decision",
                "rule",
                "subject",
                "client_id",
                "token_fp",
                "bytes_in",
                "bytes_out",
                "error_row",
                "outcome",
                "backend_ms",
                "duration_ms",
            )
        } == {
            "request_id": "req-1",
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
            "method": "tools/call",
            "tool": "search_docs",
            "protocol_version": "2026-07-28",
            "status": 200,
            "jsonrpc_code": None,
            "decision": "allow",
            "rule": "search_docs",
            "subject": "alice@example.com",
            "client_id": "claude-code",
            "token_fp": FINGERPRINT,
            "bytes_in": 180,
            "bytes_out": 420,
            "error_row": None,
            "outcome": "ok",
            "backend_ms": 12.5,
            "duration_ms": 42.1,
        }

    def test_the_subject_is_a_fingerprint_when_configured(
        self, metrics: Metrics, clock: Clock, logs: list[MutableMapping[str, Any]]
    ) -> None:
        run(observer(metrics, clock, subject="fingerprint"), tool_call(clock), clock)
        (line,) = [entry for entry in logs if entry["event"] == ACCESS_EVENT]
        assert line["subject"] == subject_fingerprint("alice@example.com")
        assert line["subject"].startswith("sha256:") and len(line["subject"]) == 23
        assert "alice" not in json.dumps(logs)

    def test_every_line_logged_during_the_request_carries_its_ids_and_none_after(
        self, metrics: Metrics, clock: Clock, logs: list[MutableMapping[str, Any]]
    ) -> None:
        obs = observer(metrics, clock)
        ctx = tool_call(clock)
        log = structlog.get_logger("gateway.test")
        obs.request_started(ctx)
        log.info("inside.one")
        log.warning("inside.two")
        obs.request_finished(ctx)
        log.info("outside")
        inside = [entry for entry in logs if entry["event"] != "outside"]
        assert len(inside) == 3
        for entry in inside:
            assert entry["request_id"] == "req-1"
            assert entry["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
        (after,) = [entry for entry in logs if entry["event"] == "outside"]
        assert "request_id" not in after and "trace_id" not in after

    def test_an_outer_request_id_binding_survives_the_request(
        self, metrics: Metrics, clock: Clock, logs: list[MutableMapping[str, Any]]
    ) -> None:
        obs = observer(metrics, clock)
        with structlog.contextvars.bound_contextvars(request_id="req-1"):
            run(obs, tool_call(clock), clock)
            structlog.get_logger("gateway.app").info("http.request")
        (outer,) = [entry for entry in logs if entry["event"] == "http.request"]
        assert outer["request_id"] == "req-1" and "trace_id" not in outer

    def test_client_controlled_strings_are_cut_to_fixed_lengths(
        self, metrics: Metrics, clock: Clock, logs: list[MutableMapping[str, Any]]
    ) -> None:
        ctx = tool_call(clock, tool="t" * 1000, method="m" * 1000, protocol_version="v" * 999)
        run(observer(metrics, clock), ctx, clock)
        (line,) = [entry for entry in logs if entry["event"] == ACCESS_EVENT]
        assert (len(line["tool"]), len(line["method"]), len(line["protocol_version"])) == (
            128,
            64,
            32,
        )

    def test_argument_values_are_never_logged_and_their_shape_only_on_request(
        self,
        metrics: Metrics,
        clock: Clock,
        audit_stream: io.StringIO,
        logs: list[MutableMapping[str, Any]],
    ) -> None:
        arguments = {"query": "quarterly secret plan", "limit": 3, "filters": {"a": 1}}
        run(
            observer(metrics, clock, audit_stream),
            tool_call(clock, extra={"arguments": arguments}),
            clock,
        )
        run(
            observer(metrics, clock, audit_stream, log_arguments=True),
            tool_call(clock, extra={"arguments": arguments}),
            clock,
        )
        dumped = json.dumps(logs) + audit_stream.getvalue()
        assert "quarterly secret plan" not in dumped
        first, second = [entry for entry in logs if entry["event"] == ACCESS_EVENT]
        assert "arguments" not in first
        assert second["arguments"] == {"query": "string", "limit": "integer", "filters": "object"}
        events = [json.loads(line) for line in audit_stream.getvalue().splitlines()]
        assert "arguments" not in events[0]
        assert events[1]["arguments"] == second["arguments"]


class TestTokenNeverWritten:
    def test_the_token_appears_in_no_log_line_and_no_audit_event(
        self,
        metrics: Metrics,
        clock: Clock,
        audit_stream: io.StringIO,
        logs: list[MutableMapping[str, Any]],
    ) -> None:
        obs = observer(metrics, clock, audit_stream)
        for ctx in (
            tool_call(clock),
            tool_call(
                clock,
                request_id="req-2",
                status=401,
                error_row="invalid_token",
                outcome=None,
                backend_ms=None,
                decision=None,
            ),
            context(
                clock, request_id="req-3", method="tools/list", status=200, principal=principal()
            ),
        ):
            run(obs, ctx, clock)
        assert logs and audit_stream.getvalue()
        everything = json.dumps(logs) + audit_stream.getvalue() + metrics_text(metrics)
        assert TOKEN not in everything
        assert TOKEN.split(".")[2] not in everything  # not even the signature part
        assert FINGERPRINT in everything  # the non-reversible fingerprint is what correlates


def metrics_text(metrics: Metrics) -> str:
    from gateway.observability.metrics import metrics_response_body

    return metrics_response_body(metrics)[0].decode()


class TestAudit:
    def test_one_event_per_tool_call_with_the_documented_fields(
        self, metrics: Metrics, clock: Clock, audit_stream: io.StringIO
    ) -> None:
        obs = observer(metrics, clock, audit_stream)
        run(obs, tool_call(clock), clock, 0.02)
        run(obs, context(clock, method="tools/list", status=200, principal=principal()), clock)
        run(obs, context(clock, method="ping", status=200), clock)
        (event,) = [json.loads(line) for line in audit_stream.getvalue().splitlines()]
        chain = event.pop("chain")  # the links of the hash chain (test_obs_audit_chain.py)
        assert (event.pop("seq"), event.pop("prev"), chain.partition("@")[0]) == (
            1,
            "0" * 64,
            f"{socket.gethostname()}:{os.getpid()}",
        )
        assert event == {
            "ts": "2026-11-30T00:53:20.000Z",
            "log": "audit",
            "event": "tool_call",
            "request_id": "req-1",
            "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
            "subject": "alice@example.com",
            "client_id": "claude-code",
            "tool": "search_docs",
            "decision": "allow",
            "rule": "search_docs",
            "granted_scopes": ["mcp:access", "docs:read"],
            "missing_scopes": [],
            "outcome": "ok",
            "duration_ms": 20.0,
            "backend_ms": 12.5,
            "status": 200,
            "jsonrpc_code": None,
            "error_row": None,
            "token_fp": FINGERPRINT,
            "auth_method": "introspection",
            "issuer": "https://id.example.com",
        }

    def test_a_denied_call_records_the_rule_and_the_missing_scopes(
        self, metrics: Metrics, clock: Clock, audit_stream: io.StringIO
    ) -> None:
        ctx = denied_call(clock, "create_*")
        run(observer(metrics, clock, audit_stream), ctx, clock)
        event = json.loads(audit_stream.getvalue())
        assert (event["decision"], event["rule"], event["missing_scopes"], event["outcome"]) == (
            "deny",
            "create_*",
            ["tickets:write"],
            "denied",
        )
        assert (event["status"], event["error_row"], event["backend_ms"]) == (
            403,
            "tool_insufficient_scope",
            None,
        )

    def test_a_call_refused_before_the_policy_ran_is_decision_none_outcome_rejected(
        self, metrics: Metrics, clock: Clock, audit_stream: io.StringIO
    ) -> None:
        ctx = tool_call(
            clock,
            decision=None,
            status=400,
            jsonrpc_code=-32020,
            error_row="header_mismatch",
            outcome=None,
            backend_ms=None,
        )
        run(observer(metrics, clock, audit_stream), ctx, clock)
        event = json.loads(audit_stream.getvalue())
        assert (event["decision"], event["outcome"], event["jsonrpc_code"]) == (
            "none",
            "rejected",
            -32020,
        )

    def test_the_audit_subject_follows_the_logging_subject_setting(
        self, metrics: Metrics, clock: Clock, audit_stream: io.StringIO
    ) -> None:
        run(observer(metrics, clock, audit_stream, subject="fingerprint"), tool_call(clock), clock)
        event = json.loads(audit_stream.getvalue())
        assert event["subject"] == subject_fingerprint("alice@example.com")

    def test_an_off_sink_writes_nothing(self, metrics: Metrics, clock: Clock) -> None:
        sink = AuditSink.from_config(AuditConfig(sink="off"))
        obs = GatewayObserver(
            metrics=metrics, logging_config=LoggingConfig(), audit=sink, clock=clock
        )
        run(obs, tool_call(clock), clock)
        assert not sink.enabled


class TestContextBinding:
    def test_finishing_in_another_context_still_unbinds_and_does_not_raise(
        self, metrics: Metrics, clock: Clock
    ) -> None:
        obs = observer(metrics, clock)
        ctx = tool_call(clock)
        started = contextvars.copy_context()
        started.run(obs.request_started, ctx)
        finished = started.copy()  # same values, but a different Context object
        finished.run(obs.request_finished, ctx)
        bound = finished.run(structlog.contextvars.get_contextvars)
        assert "request_id" not in bound and "trace_id" not in bound
        assert sample(metrics, "mcp_gateway_in_flight") == 0

    def test_a_finish_without_a_start_only_removes_the_ids(
        self, metrics: Metrics, clock: Clock
    ) -> None:
        structlog.contextvars.bind_contextvars(request_id="stale", trace_id="stale")
        GatewayObserver(
            metrics=metrics,
            logging_config=LoggingConfig(),
            audit=None,
            record_request_metrics=False,
            clock=clock,
        ).request_finished(tool_call(clock))
        assert structlog.contextvars.get_contextvars() == {}
