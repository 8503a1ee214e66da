"""Observability through the real listeners: /metrics deltas, log lines, audit events, no token.

The production composition (``gateway/wiring/production.py``) with the seams' fakes: ``McpEndpoint``
records the request metrics, :class:`GatewayObserver` (``record_request_metrics=False``) writes the
access line and the audit events, ``build_public_app`` / ``build_ops_app`` serve the two listeners
on loopback. structlog is configured as in production (JSON renderer, redaction) into a buffer, so
the assertions read the exact bytes an operator would ship.
"""

from __future__ import annotations

import hashlib
import io
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from gateway.app import Services, build_ops_app, build_public_app
from gateway.app.connection_limits import ListenerLimits
from gateway.app.request_id import assign_request_id
from gateway.config import AuditConfig, LoggingConfig
from gateway.http.pipeline.endpoint import McpEndpoint
from gateway.http.pipeline.routes import add_mcp_routes
from gateway.limits.memory import MemoryRateLimiter
from gateway.observability.access import ACCESS_EVENT, GatewayObserver
from gateway.observability.audit import AuditSink
from gateway.observability.metrics import Metrics
from gateway.seams import Principal
from tests.support.fakes import FakeAuthenticator, FakeBackend, FakePolicySource, default_policy
from tests.support.gateway_harness import (
    ListenerTestServer,
    harness_config,
    modern_headers,
    modern_request,
)

TOKEN = "mcp_at_5fJ2kQ9xV7wLr3Tz8Yb1Nc6Hd4Ge0Ua"
"""The one valid bearer token: it must not appear in any byte the gateway writes."""

FINGERPRINT = hashlib.sha256(TOKEN.encode()).hexdigest()[:16]
SECRET_ARGUMENT = "quarterly-plan-do-not-log"


def alice() -> Principal:
    return Principal(
        subject="alice@example.com",
        client_id="claude-code",
        scopes=frozenset({"mcp:access", "docs:read"}),
        expires_at=time.time() + 3600,
        issuer="https://id.example.com",
        fingerprint=FINGERPRINT,
    )


@dataclass(slots=True)
class Stack:
    public: TestClient[web.Request, web.Application]
    ops: TestClient[web.Request, web.Application]
    metrics: Metrics
    logs: io.StringIO
    audit: io.StringIO
    backend: FakeBackend
    mcp_path: str

    def log_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.logs.getvalue().splitlines()]

    def audit_events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit.getvalue().splitlines()]

    async def scrape(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
        response = await self.ops.get("/metrics")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }


def delta(
    before: Mapping[tuple[str, frozenset[tuple[str, str]]], float],
    after: Mapping[tuple[str, frozenset[tuple[str, str]]], float],
    name: str,
    **labels: str,
) -> float:
    """Sum of the change of every ``name`` sample whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(
        value - before.get(key, 0.0)
        for key, value in after.items()
        if key[0] == name and wanted <= key[1]
    )


@pytest.fixture
async def stack(aiohttp_server: Any, aiohttp_client: Any, json_log: io.StringIO) -> Stack:
    config = harness_config()
    metrics = Metrics()
    metrics.set_catalog_names({"search_docs", "create_ticket", "echo"})
    audit_stream = io.StringIO()
    backend = FakeBackend()
    observer = GatewayObserver(
        metrics=metrics,
        logging_config=LoggingConfig(),
        audit=AuditSink.from_config(AuditConfig(sink="stdout"), stream=audit_stream),
        record_request_metrics=False,
    )
    # The same parts serve the endpoint and the services the apps are built from.
    parts: dict[str, Any] = {
        "authenticator": FakeAuthenticator({TOKEN: alice()}),
        "policy": FakePolicySource(default_policy()),
        "backend": backend,
        "limiter": MemoryRateLimiter(),
        "observer": observer,
        "metrics": metrics,
    }
    request_id = lambda request: assign_request_id(request, config.trusted_proxies)  # noqa: E731
    endpoint = McpEndpoint(config=config, request_id=request_id, **parts)
    services = Services(**parts)
    services.install_routes = lambda app: add_mcp_routes(
        app, endpoint, config=config, prm_document=None
    )
    # The production listener, so the MCP path takes its fast lane and plain write
    # (gateway/app/fast_path.py) with the production app's X-Request-Id signal.
    public_server = ListenerTestServer(
        build_public_app(config, services), limits=ListenerLimits.from_config(config)
    )
    ops_server: TestServer = await aiohttp_server(
        build_ops_app(config, services), host="127.0.0.1", port=0
    )
    return Stack(
        public=await aiohttp_client(public_server),
        ops=await aiohttp_client(ops_server),
        metrics=metrics,
        logs=json_log,
        audit=audit_stream,
        backend=backend,
        mcp_path=config.mcp_path,
    )


def with_token(headers: dict[str, str]) -> dict[str, str]:
    return {**headers, "Authorization": f"Bearer {TOKEN}"}


async def call_tool(stack: Stack, name: str, arguments: Mapping[str, Any]) -> Any:
    body = modern_request("tools/call", 7, {"name": name, "arguments": dict(arguments)})
    headers = with_token(modern_headers("tools/call", name))
    return await stack.public.post(stack.mcp_path, data=json.dumps(body), headers=headers)


async def run_script(stack: Stack) -> list[tuple[str, int, str]]:
    """The scripted sequence; returns (step, status, X-Request-Id) per request."""
    seen: list[tuple[str, int, str]] = []

    def record(step: str, response: Any) -> None:
        seen.append((step, response.status, response.headers["X-Request-Id"]))

    list_body = json.dumps(modern_request("tools/list", 1))
    bare = modern_headers("tools/list")
    del bare["Authorization"]
    record("no credentials", await stack.public.post(stack.mcp_path, data=list_body, headers=bare))
    record(
        "unknown token",
        await stack.public.post(
            stack.mcp_path,
            data=list_body,
            headers={**bare, "Authorization": "Bearer mcp_at_revoked0000000000000000"},
        ),
    )
    record(
        "tools/list",
        await stack.public.post(
            stack.mcp_path, data=list_body, headers=with_token(modern_headers("tools/list"))
        ),
    )
    record("allowed call", await call_tool(stack, "search_docs", {"query": SECRET_ARGUMENT}))
    record("step-up call", await call_tool(stack, "create_ticket", {"title": SECRET_ARGUMENT}))
    record("second allowed call", await call_tool(stack, "echo", {"text": SECRET_ARGUMENT}))
    record("hidden tool call", await call_tool(stack, "admin_reset", {"x": SECRET_ARGUMENT}))
    record("GET on the MCP path", await stack.public.get(stack.mcp_path))
    return seen


async def test_a_scripted_sequence_moves_each_counter_by_exactly_its_requests(
    stack: Stack,
) -> None:
    before = await stack.scrape()
    steps = await run_script(stack)
    after = await stack.scrape()

    assert [(step, status) for step, status, _ in steps] == [
        ("no credentials", 401),
        ("unknown token", 401),
        ("tools/list", 200),
        ("allowed call", 200),
        ("step-up call", 403),
        ("second allowed call", 200),
        ("hidden tool call", 400),
        ("GET on the MCP path", 405),
    ]
    total = "mcp_gateway_requests_total"
    assert delta(before, after, total) == 8
    assert delta(before, after, total, status="401", decision="none") == 2
    assert delta(before, after, total, method="tools/list", status="200", decision="allow") == 1
    assert delta(before, after, total, method="tools/call", status="200", decision="allow") == 2
    assert delta(before, after, total, method="tools/call", status="403", decision="deny") == 1
    assert delta(before, after, total, method="tools/call", status="400", decision="deny") == 1
    assert delta(before, after, total, status="405") == 1
    rejections = "mcp_gateway_rejections_total"
    assert delta(before, after, rejections) == 5
    assert delta(before, after, rejections, row="no_credentials") == 1
    assert delta(before, after, rejections, row="invalid_token") == 1
    assert delta(before, after, rejections, row="tool_insufficient_scope") == 1
    assert delta(before, after, rejections, row="unknown_tool") == 1
    assert delta(before, after, rejections, row="method_not_allowed") == 1
    duration = "mcp_gateway_request_duration_seconds_count"
    assert delta(before, after, duration, method="tools/call") == 4
    assert delta(before, after, duration) == 8
    assert after[("mcp_gateway_in_flight", frozenset())] == 0
    assert len(stack.backend.calls) == 2


async def test_metrics_are_served_on_the_ops_listener_only(stack: Stack) -> None:
    public = await stack.public.get("/metrics")
    assert public.status == 404
    assert "mcp_gateway_" not in await public.text()
    ops = await stack.ops.get("/metrics")
    assert ops.status == 200
    assert "# TYPE mcp_gateway_requests_total counter" in await ops.text()


async def test_every_log_line_of_a_request_carries_its_request_id_and_the_token_never(
    stack: Stack,
) -> None:
    steps = await run_script(stack)
    lines = stack.log_lines()
    request_ids = {rid for _, _, rid in steps}
    assert len(request_ids) == len(steps)
    assert lines
    for line in lines:
        # Nothing else runs while the script does: every line belongs to one of its requests.
        assert line.get("request_id") in request_ids, line
    access = [line for line in lines if line["event"] == ACCESS_EVENT]
    # Exactly one access line per request on the MCP path, refusals included.
    assert sorted(line["request_id"] for line in access) == sorted(request_ids)
    for step, status, rid in steps:
        (line,) = [entry for entry in access if entry["request_id"] == rid]
        assert line["status"] == status, step
        assert line["trace_id"] and len(line["trace_id"]) == 32
    raw = stack.logs.getvalue()
    assert TOKEN not in raw
    assert "mcp_at_revoked0000000000000000" not in raw
    assert SECRET_ARGUMENT not in raw
    assert FINGERPRINT in raw


async def test_one_audit_event_per_tool_call_with_decision_and_outcome(stack: Stack) -> None:
    steps = await run_script(stack)
    ids = {step: rid for step, _, rid in steps}
    events = stack.audit_events()
    assert [event["request_id"] for event in events] == [
        ids["allowed call"],
        ids["step-up call"],
        ids["second allowed call"],
        ids["hidden tool call"],
    ]
    allowed, step_up, second, hidden = events
    assert {
        key: allowed[key]
        for key in (
            "event",
            "subject",
            "client_id",
            "tool",
            "decision",
            "rule",
            "missing_scopes",
            "outcome",
            "status",
            "token_fp",
        )
    } == {
        "event": "tool_call",
        "subject": "alice@example.com",
        "client_id": "claude-code",
        "tool": "search_docs",
        "decision": "allow",
        "rule": "search_docs",
        "missing_scopes": [],
        "outcome": "ok",
        "status": 200,
        "token_fp": FINGERPRINT,
    }
    assert allowed["backend_ms"] is not None and allowed["duration_ms"] >= allowed["backend_ms"]
    assert (step_up["decision"], step_up["rule"], step_up["missing_scopes"]) == (
        "deny",
        "create_ticket",
        ["tickets:write"],
    )
    assert (step_up["outcome"], step_up["status"], step_up["error_row"]) == (
        "denied",
        403,
        "tool_insufficient_scope",
    )
    assert step_up["backend_ms"] is None
    assert (second["tool"], second["outcome"]) == ("echo", "ok")
    # A tool the caller may not see is answered "unknown", and audited as a policy denial.
    assert (hidden["tool"], hidden["decision"], hidden["outcome"], hidden["error_row"]) == (
        "admin_reset",
        "deny",
        "denied",
        "unknown_tool",
    )
    raw = stack.audit.getvalue()
    assert TOKEN not in raw and SECRET_ARGUMENT not in raw
    assert all(event["trace_id"] and len(event["trace_id"]) == 32 for event in events)


async def test_a_client_traceparent_is_kept_and_forwarded_with_the_gateway_span(
    stack: Stack,
) -> None:
    trace_id, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    body = modern_request("tools/call", 3, {"name": "echo", "arguments": {"text": "hi"}})
    headers = with_token(modern_headers("tools/call", "echo"))
    headers["traceparent"] = f"00-{trace_id}-{parent}-01"
    headers["tracestate"] = "congo=t61rcWkgMzE"
    response = await stack.public.post(stack.mcp_path, data=json.dumps(body), headers=headers)
    assert response.status == 200
    (recorded,) = stack.backend.calls
    forwarded = recorded.call.traceparent
    assert forwarded is not None
    version, forwarded_trace, span, flags = forwarded.split("-")
    assert (version, forwarded_trace, flags) == ("00", trace_id, "01")
    assert span != parent and len(span) == 16
    assert recorded.call.tracestate == "congo=t61rcWkgMzE"
    (line,) = [entry for entry in stack.log_lines() if entry["event"] == ACCESS_EVENT]
    assert (line["trace_id"], line["span_id"]) == (trace_id, span)
    (event,) = stack.audit_events()
    assert event["trace_id"] == trace_id
