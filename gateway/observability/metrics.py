"""Prometheus metrics on the gateway's own registry (served only on the ops listener).

Every collector is defined here, once, with the ``mcp_gateway_`` prefix. Label values are
bounded: callers pass ``tool_label()`` for tools (catalog names only, anything else ``other``) and
fixed vocabularies for every other label.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

__all__ = ["LATENCY_BUCKETS", "Metrics"]

LATENCY_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


class Metrics:
    """All collectors, on a private registry (never the process-global default)."""

    def __init__(self, version: str = "0.1.0") -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        p = "mcp_gateway_"
        self.requests_total = Counter(
            p + "requests_total", "MCP requests by JSON-RPC method, HTTP status and decision",
            ["method", "status", "decision"], registry=r,
        )  # fmt: skip
        self.request_duration_seconds = Histogram(
            p + "request_duration_seconds", "End-to-end MCP request duration",
            ["method"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.introspection_total = Counter(
            p + "introspection_total", "Introspection calls to the issuer by result",
            ["result"], registry=r,
        )  # fmt: skip
        self.introspection_duration_seconds = Histogram(
            p + "introspection_duration_seconds", "Introspection call duration",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.token_cache_total = Counter(
            p + "token_cache_total", "Token cache lookups: hit, miss, coalesced, stale",
            ["outcome"], registry=r,
        )  # fmt: skip
        self.backend_requests_total = Counter(
            p + "backend_requests_total", "Upstream tool calls by tool and outcome",
            ["tool", "outcome"], registry=r,
        )  # fmt: skip
        self.backend_duration_seconds = Histogram(
            p + "backend_duration_seconds", "Upstream tool call duration",
            ["tool"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.in_flight = Gauge(p + "in_flight", "MCP requests in flight", registry=r)
        self.rate_limited_total = Counter(
            p + "rate_limited_total", "Requests refused by a rate limit, by limit scope",
            ["scope"], registry=r,
        )  # fmt: skip
        self.policy_reloads_total = Counter(
            p + "policy_reloads_total", "Policy reload attempts by result", ["result"], registry=r
        )
        self.policy_info = Gauge(
            p + "policy_info", "The active policy set (value 1) by version hash", ["version"],
            registry=r,
        )  # fmt: skip
        self.catalog_tools = Gauge(p + "catalog_tools", "Tools in the backend catalog", registry=r)
        self.catalog_age_seconds = Gauge(
            p + "catalog_age_seconds", "Seconds since the last successful catalog fetch", registry=r
        )
        self.catalog_refresh_total = Counter(
            p + "catalog_refresh_total", "Catalog refreshes by result", ["result"], registry=r
        )
        self.build_info = Info(p + "build", "Gateway build information", registry=r)
        self.build_info.info({"version": version})
        self._catalog_names: Container[str] = frozenset()

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
