"""The record of one request on the MCP path: its context when it arrives, its metrics,
observer callbacks and trace when it ends.

Split from :mod:`gateway.http.pipeline.endpoint` (which admits and answers the request): the
endpoint calls :meth:`RequestRecord.context` first and :meth:`RequestRecord.finish` last, once per
request, whatever the outcome (a long-lived ``subscriptions/listen`` stream is finished when it
ends).
"""

from __future__ import annotations

import ipaddress
import os
import time
from collections.abc import Callable
from typing import Final

from aiohttp import web
from multidict import CIMultiDictProxy

from gateway.http.admission import client_ip, warn_untrusted_proxy
from gateway.http.pipeline.traced import begin as begin_trace
from gateway.observability import loop_metrics, spans
from gateway.observability.metric_labels import method_label
from gateway.observability.metrics import Metrics
from gateway.observability.spans import RequestTracer
from gateway.observability.tracing import trace_context
from gateway.seams import Observer, RequestContext

__all__ = ["PROXY_WARNING_INTERVAL_S", "RequestRecord"]

PROXY_WARNING_INTERVAL_S: Final = 3600.0
"""How often ``trusted_proxies_unset`` may be logged (see admission.warn_untrusted_proxy)."""


class RequestRecord:
    """Builds each request's :class:`RequestContext` and records it when it ends."""

    def __init__(
        self,
        *,
        trusted: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...],
        metrics: Metrics | None,
        observer: Observer | None,
        request_id: Callable[[web.Request], str | None] | None,
        tracing: RequestTracer | None,
    ) -> None:
        self._trusted = trusted
        self._metrics = metrics
        self._observer = observer
        self._request_id = request_id
        self._tracing = tracing
        self._proxy_warn_at = 0.0
        self._request_children: dict[tuple[str, str, str], loop_metrics.LoopValue] = {}
        self._duration_children: dict[str, loop_metrics.LoopHistogram] = {}

    def context(self, request: web.Request, started: float) -> RequestContext:
        headers = request.headers
        trace = trace_context(headers.get("traceparent"), _joined(headers, "tracestate"))
        rid = self._request_id(request) if self._request_id is not None else None
        peer = request.transport.get_extra_info("peername") if request.transport else None
        peer_ip = peer[0] if isinstance(peer, tuple) and peer else None
        forwarded = headers.getall("X-Forwarded-For", ())
        # The first such request after start, then at most once an hour.
        if (
            forwarded
            and not self._trusted
            and started >= self._proxy_warn_at
            and warn_untrusted_proxy(peer_ip)
        ):
            self._proxy_warn_at = started + PROXY_WARNING_INTERVAL_S
        ip = client_ip(peer_ip, forwarded, self._trusted)
        ctx = RequestContext(
            request_id=rid or os.urandom(16).hex(),
            trace_id=trace.trace_id,
            span_id=trace.span_id,
            started=started,
            client_ip=ip,
            traceparent=trace.traceparent,
            tracestate=trace.tracestate,
            http_method=request.method,
        )
        if self._tracing is not None:
            begin_trace(self._tracing, trace, ctx)
        return ctx

    def finish(self, ctx: RequestContext, started: float) -> None:
        trace = spans.current_trace() if self._tracing is not None else None
        metrics = self._metrics
        if metrics is not None:
            method = method_label(ctx.method)
            decision = ctx.decision
            label = "none" if decision is None else ("allow" if decision.allowed else "deny")
            key = (method, str(ctx.status), label)
            # Label children are looked up once per (bounded) label set, not per request, and
            # updated without prometheus-client's lock (:mod:`~gateway.observability.loop_metrics`).
            counter = self._request_children.get(key)
            if counter is None:
                counter = loop_metrics.counter(metrics.requests_total.labels(*key))
                self._request_children[key] = counter
            counter.inc()
            histogram = self._duration_children.get(method)
            if histogram is None:
                histogram = loop_metrics.histogram(metrics.request_duration_seconds.labels(method))
                self._duration_children[method] = histogram
            if trace is None:
                histogram.observe(time.monotonic() - started)
            else:  # an exemplar: the dashboard links the latency to the trace
                histogram.observe(time.monotonic() - started, {"trace_id": trace.trace_id})
        if self._observer is not None:
            self._observer.request_finished(ctx)
        if trace is not None and self._tracing is not None:
            self._tracing.finish(trace, ctx)


def _joined(headers: CIMultiDictProxy[str], name: str) -> str | None:
    # RFC 9110 §5.3: several field lines combine into one comma-separated value.
    values = headers.getall(name, ())
    return ",".join(values) if values else None
