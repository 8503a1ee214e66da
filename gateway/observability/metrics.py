"""Prometheus metrics on the gateway's own registry (served only on the ops listener).

Every collector is defined once, with the ``mcp_gateway_`` prefix (:mod:`.collectors`): here,
or for a feature with a family of its own, in its module (:mod:`.guardrail_metrics`), built
here all the same. Label values are
bounded: callers pass ``tool_label()`` for tools (catalog names only, anything else ``other``),
``method_label()`` for JSON-RPC methods, and one of the fixed vocabularies of
:mod:`gateway.observability.metric_labels` for every other label. Series of the fixed vocabularies
are created at zero up front, so ``rate()`` and the alert rules see them from the first scrape
(``deploy/prometheus/alerts.yml``).

Exposition (Prometheus text format 0.0.4, or OpenMetrics when the scraper asks for it) is
:func:`metrics_response_body`; the ops listener serves it at ``/metrics`` and the public
listener never does. The reference of every metric is ``docs/operations.md``.

With ``serve --workers N`` every worker keeps this registry as it is; the supervisor merges the
workers' expositions into one (:mod:`gateway.observability.group_metrics`, which also defines
the supervisor's own series and how each gauge combines).
"""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any, Final

from prometheus_client import CollectorRegistry, Info
from prometheus_client.exposition import choose_encoder

from gateway.errors import all_rows
from gateway.observability.approval_metrics import ApprovalMetrics
from gateway.observability.catalog_metrics import CatalogMetrics
from gateway.observability.collectors import LATENCY_BUCKETS, PREFIX, Collectors
from gateway.observability.guardrail_metrics import GuardrailMetrics
from gateway.observability.metric_labels import (
    ASSERTION_RESULTS,
    DPOP_REFUSALS,
    EXCHANGE_RESULTS,
    INPUT_KINDS,
    INPUT_ROUND_EVENTS,
    INTROSPECTION_RESULTS,
    JWKS_FETCH_RESULTS,
    JWT_RESULTS,
    LOGIN_EVENTS,
    PDP_OUTCOMES,
    POLICY_RELOAD_RESULTS,
    RATE_LIMIT_SCOPES,
    STORE_ERROR_KINDS,
    TOKEN_CACHE_OUTCOMES,
    TRACE_DROP_REASONS,
    UPSTREAM_CONSENT_EVENTS,
    UPSTREAM_REFRESH_RESULTS,
)
from gateway.seams import AUTH_METHODS

__all__ = ["LATENCY_BUCKETS", "Metrics", "metrics_response_body"]

_ROWS: Final = frozenset(cls.row for cls in all_rows())


class Metrics:
    """All collectors, on a private registry (never the process-global default)."""

    def __init__(self, version: str = "0.1.0") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        make = Collectors(self.registry)
        counter, histogram, gauge = make.counter, make.histogram, make.gauge
        self.requests_total = counter(
            "requests_total",
            "MCP requests by JSON-RPC method, HTTP status and decision",
            ("method", "status", "decision"),
        )
        self.request_duration_seconds = histogram(
            "request_duration_seconds", "End-to-end MCP request duration", ("method",)
        )
        self.introspection_total = counter(
            "introspection_total",
            "Introspection calls to the issuer by result",
            ("result",),
            zero=INTROSPECTION_RESULTS,
        )
        self.introspection_duration_seconds = histogram(
            "introspection_duration_seconds", "Introspection call duration"
        )
        self.jwt_validations_total = counter(
            "jwt_validations_total",
            "Local JWT access-token validations by result",
            ("result",),
            zero=JWT_RESULTS,
        )
        self.jwt_validation_duration_seconds = histogram(
            "jwt_validation_duration_seconds",
            "Local JWT validation duration (signature and claims; cache hits skip it)",
        )
        self.jwks_fetch_total = counter(
            "jwks_fetch_total",
            "JWK Set fetches from issuers by result",
            ("result",),
            zero=JWKS_FETCH_RESULTS,
        )
        self.authentications_total = counter(
            "authentications_total",
            "Accepted tokens by how they were checked",
            ("auth_method",),
            zero=AUTH_METHODS,
        )
        self.dpop_refusals_total = counter(
            "dpop_refusals_total",
            "Requests refused for DPoP (RFC 9449) by reason",
            ("reason",),
            zero=DPOP_REFUSALS,
        )
        self.token_cache_total = counter(
            "token_cache_total",
            "Token cache lookups: hit, miss, coalesced, stale",
            ("outcome",),
            zero=TOKEN_CACHE_OUTCOMES,
        )
        self.backend_requests_total = counter(
            "backend_requests_total",
            "Upstream tool calls by backend, tool and outcome",
            ("backend", "tool", "outcome"),
        )
        self.backend_duration_seconds = histogram(
            "backend_duration_seconds", "Upstream tool call duration", ("backend", "tool")
        )
        self.input_rounds_total = counter(
            "input_rounds_total",
            "2026-07-28 input rounds: relayed, resumed, rejected or refused, by event",
            ("event",),
            zero=INPUT_ROUND_EVENTS,
        )
        self.tasks_total = counter(
            "tasks_total",
            "Tasks relayed: created, and the terminal status first seen, by backend",
            ("backend", "event"),
        )
        self.input_requests_total = counter(
            "input_requests_total",
            "Input requests relayed to clients, by kind",
            ("kind",),
            zero=INPUT_KINDS,
        )
        self.identity_assertions_total = counter(
            "identity_assertions_total",
            "Caller assertions by backend: signed or reused",
            ("backend", "result"),
        )
        self.token_exchanges_total = counter(
            "token_exchanges_total",
            "RFC 8693 token exchanges by backend and result",
            ("backend", "result"),
        )
        self.exchanged_tokens = gauge(
            "exchanged_tokens", "Exchanged tokens cached, by backend", ("backend",)
        )
        # user_oauth backends (gateway/backend/credentials/user_credential.py, connections/).
        self.upstream_consents_total = counter(
            "upstream_consents_total",
            "Per-user upstream connections by backend and event (started, completed, failed)",
            ("backend", "event"),
        )
        self.upstream_refreshes_total = counter(
            "upstream_refreshes_total",
            "Refreshes of people's upstream tokens by result",
            ("backend", "result"),
        )
        self.upstream_connections = gauge(
            "upstream_connections",
            "People with a stored upstream token record, by backend",
            ("backend",),
        )
        self.policy_external_decisions_total = counter(
            "policy_external_decisions_total",
            "External decision point (AuthZEN) consultations by outcome",
            ("outcome",),
        )
        self.policy_external_duration_seconds = histogram(
            "policy_external_duration_seconds",
            "External decision point (AuthZEN) request duration",
        )
        self.guardrails = GuardrailMetrics(make)
        self.approvals = ApprovalMetrics(make)
        self.in_flight = gauge("in_flight", "MCP requests in flight")
        self.surface_requests_total = counter(
            "surface_requests_total",
            "prompts/get, resources/read and completion/complete by method, matched policy rule "
            "and outcome",
            ("method", "rule", "outcome"),
        )
        self._surface_children: dict[tuple[str, str | None, str], Any] = {}
        self.rate_limited_total = counter(
            "rate_limited_total",
            "Requests refused by a rate limit, by limit scope",
            ("scope",),
            zero=RATE_LIMIT_SCOPES,
        )
        self.policy_condition_errors_total = counter(
            "policy_condition_errors_total",
            "when: conditions that could not be evaluated (each one denied), by policy section "
            "and rule",
            ("section", "rule"),
        )
        self.policy_reloads_total = counter(
            "policy_reloads_total",
            "Policy reload attempts by result",
            ("result",),
            zero=POLICY_RELOAD_RESULTS,
        )
        self.policy_info = gauge(
            "policy_info", "The active policy set (value 1) by version hash", ("version",)
        )
        self.catalog = CatalogMetrics(make)
        self.build_info = Info(
            PREFIX + "build", "Gateway build information", registry=self.registry
        )
        self.build_info.info({"version": version})
        self.rejections_total = counter(
            "rejections_total",
            "Requests answered with a status-table error row",
            ("row",),
            zero=sorted(_ROWS),
        )
        self.login_events_total = counter(
            "login_events_total",
            "Browser login surface events (sign-ins, refusals, actions)",
            ("event",),
            zero=LOGIN_EVENTS,
        )
        # tracing: (gateway/observability/otel.py): spans never wait for the collector.
        self.trace_spans_dropped_total = counter(
            "trace_spans_dropped_total",
            "Spans dropped instead of exported: the export queue was full, or the export failed",
            ("reason",),
            zero=TRACE_DROP_REASONS,
        )
        self.trace_spans_exported_total = counter(
            "trace_spans_exported_total", "Spans the OTLP collector accepted"
        )
        self.policy_last_reload_success = gauge(
            "policy_last_reload_success",
            "1 when the last policy reload succeeded (or none failed yet), 0 while the files on "
            "disk are invalid and the previous policy keeps serving",
        )
        self.policy_last_reload_success.set(1)  # the gateway only starts on a valid policy
        self.max_in_flight = gauge(
            "max_in_flight", "Configured in-flight cap (limits.max_in_flight)"
        )
        self.state_store_up = gauge(
            "state_store_up",
            "1 while the last call to the shared state store (Redis) succeeded, else 0",
        )
        self.state_store_up.set(1)  # the memory backend is always there; RedisStore sets its own
        self.state_store_errors_total = counter(
            "state_store_errors_total",
            "Decisions that needed the shared store and fell back per state.on_store_error",
            ("kind",),
            zero=STORE_ERROR_KINDS,
        )
        self._catalog_names: Container[str] = frozenset()

    def register_identity(
        self, name: str, *, assertion: bool = False, exchange: Callable[[], int] | None = None
    ) -> None:
        """A backend's identity series: assertions when it signs them; exchanges and the
        number of exchanged tokens it caches (``exchange``) when it uses token exchange."""
        if assertion:
            for result in ASSERTION_RESULTS:
                self.identity_assertions_total.labels(backend=name, result=result)
        if exchange is not None:
            for result in EXCHANGE_RESULTS:
                self.token_exchanges_total.labels(backend=name, result=result)
            self.exchanged_tokens.labels(backend=name).set_function(lambda: float(exchange()))

    def register_user_oauth(self, name: str) -> None:
        """A ``user_oauth`` backend's series, at zero from the start."""
        for event in UPSTREAM_CONSENT_EVENTS:
            self.upstream_consents_total.labels(backend=name, event=event)
        for result in UPSTREAM_REFRESH_RESULTS:
            self.upstream_refreshes_total.labels(backend=name, result=result)
        self.upstream_connections.labels(backend=name)

    def register_policy_external(self) -> None:
        """The decision point's series, at zero from the start (only with ``policy_external``)."""
        for outcome in PDP_OUTCOMES:
            self.policy_external_decisions_total.labels(outcome=outcome)

    def set_catalog_names(self, names: Container[str]) -> None:
        """The only tool names allowed as label values (bounded cardinality)."""
        self._catalog_names = names

    def tool_label(self, tool: str | None) -> str:
        if tool is not None and tool in self._catalog_names:
            return tool
        return "other"

    def set_policy_version(self, version: str) -> None:
        self.policy_info.clear()
        self.policy_info.labels(version=version).set(1)

    def set_max_in_flight(self, limit: int) -> None:
        """Export ``limits.max_in_flight`` so the Saturation alert can compare against it."""
        self.max_in_flight.set(limit)

    def record_policy_reload(self, ok: bool, version: str | None = None) -> None:
        """Count one policy (re)load; on success export the active version in ``policy_info``."""
        self.policy_reloads_total.labels(result="success" if ok else "failure").inc()
        self.policy_last_reload_success.set(1 if ok else 0)
        if ok and version is not None:
            self.set_policy_version(version)

    def count_condition_error(self, section: str, rule: str) -> None:
        """A ``when:`` condition of ``rule`` (a policy rule's key: bounded by the policy) that
        could not be evaluated, and so denied."""
        self.policy_condition_errors_total.labels(section, rule[:256]).inc()

    def count_surface(self, method: str, rule: str | None, outcome: str) -> None:
        """One prompts/resources/completion request. ``rule`` is the matched policy rule's key
        (bounded by the policy; ``none`` when no rule matched), never the raw URI or name."""
        key = (method, rule, outcome)
        child = self._surface_children.get(key)
        if child is None:
            if len(self._surface_children) > 4096:
                self._surface_children.clear()
            label = "none" if rule is None else rule[:256]
            child = self._surface_children[key] = self.surface_requests_total.labels(
                method, label, outcome
            )
        child.inc()

    def row_label(self, row: str | None) -> str | None:
        """The ``rejections_total`` label for an error row (None when the request succeeded)."""
        if row is None:
            return None
        return row if row in _ROWS else "other"


def metrics_response_body(metrics: Metrics, accept: str | None = None) -> tuple[bytes, str]:
    """The ``/metrics`` body and its Content-Type for a scrape with this ``Accept`` header.

    Negotiation is prometheus_client's own (``choose_encoder``): OpenMetrics when asked for,
    else the text format (``version=0.0.4`` unless the scraper asks for 1.0.0).
    """
    encoder, content_type = choose_encoder(accept or "")
    return encoder(metrics.registry), content_type
