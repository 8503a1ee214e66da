"""Structured logs (structlog), the Prometheus registry, audit events and trace context.

Foundation-level: imports only errors, seams and config.
"""
