"""What the event families of a person's actions share: the login surface's
(:mod:`gateway.login.login_events`), per-user upstream authorization's
(:mod:`gateway.observability.upstream_events`) and human approval's
(:mod:`gateway.observability.approval_events`).

An event of such a family is a frozen dataclass whose optional fields are left out of its audit
line when they are None (:func:`sparse_line`); its writer (an :class:`EventTrail`) shows the
person's subject as ``logging.subject`` says (plain, or its fingerprint:
:func:`~gateway.observability.access.shown_subject`)
and hands the event to the audit sink at the clock's time. What each family counts and logs
stays with the family.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from gateway.config import LoggingConfig
from gateway.observability.access import shown_subject
from gateway.observability.audit import Auditable, AuditSink, rfc3339
from gateway.observability.lines import json_line

__all__ = ["EventTrail", "sparse_line"]

M = TypeVar("M")
"""The family's metrics (the registry's :class:`~gateway.observability.metrics.Metrics`, or a
family of its own)."""


def sparse_line(ts: float, event: Any, names: tuple[str, ...]) -> str:
    """The audit line of ``event`` at Unix time ``ts``: ``ts``, ``log``, its ``event`` name,
    then each attribute of ``names`` (in that order) that is not None."""
    record: dict[str, object] = {"ts": rfc3339(ts), "log": "audit", "event": event.event}
    for name in names:
        value = getattr(event, name)
        if value is not None:
            record[name] = value
    return json_line(record)


class EventTrail(Generic[M]):
    """Writes a family's events to the audit sink (either may be None: nothing is written or
    counted there), with the person's subject shown as configured."""

    def __init__(
        self,
        sink: AuditSink | None,
        metrics: M | None,
        logging_config: LoggingConfig,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sink = sink
        self._metrics = metrics
        self._plain = logging_config.subject == "plain"
        self._clock = clock

    def subject(self, subject: str | None) -> str | None:
        """``subject`` as the family's events and log lines show it."""
        return shown_subject(subject, self._plain)

    def _write(self, event: Auditable) -> None:
        if self._sink is not None:
            self._sink.emit(event, self._clock())
