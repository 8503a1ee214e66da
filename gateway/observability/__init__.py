"""Structured logs (structlog), the Prometheus registry, audit events and trace context.

- :mod:`.logging`: ``configure()`` once at startup, ``get_logger()``, the redaction processor.
- :mod:`.metrics`: :class:`~.metrics.Metrics` (own registry, bounded labels) and
  ``metrics_response_body()`` for the ops listener's ``/metrics``.
- :mod:`.access`: :class:`~.access.GatewayObserver`, the :class:`gateway.seams.Observer` that
  writes the access line and the audit event of each MCP request.
- :mod:`.audit`: :class:`~.audit.AuditSink` (stdout, rotating file or off).
- :mod:`.tracing`: W3C Trace Context parsing and propagation.
- :mod:`.events`: operational events that are not requests (policy reloads).

Foundation-level: imports only :mod:`gateway.errors`, :mod:`gateway.seams` and
:mod:`gateway.config` (``tests/test_layers.py``). Operator reference: ``docs/operations.md``.
"""
