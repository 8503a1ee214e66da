"""Audit trail: one JSON event per ``tools/call`` decision and outcome, and one per token
revocation (``POST /admin/revoke``), for SIEM shipping.

Events go to their own stdlib logger (``gateway.audit``, not propagated to the root logger, so
they are never mixed into or re-rendered by the application log pipeline) with one handler picked
by :class:`~gateway.config.AuditConfig`:

- ``stdout``: one JSON object per line on standard output (next to the application log; filter
  on ``"log": "audit"``), written directly through the process's batching line writer
  (:mod:`gateway.observability.lines`: flushed at the end of the loop iteration and at exit,
  so SIGTERM loses no event), not through a logger;
- ``file``: ``path`` with size rotation (``max_bytes``, ``backups``), via
  :class:`logging.handlers.RotatingFileHandler`;
- ``off``: nothing is written.

Every event written ends with ``chain``, ``seq`` and ``prev``, the links of this process's hash
chain (:mod:`gateway.observability.audit_chain`; ``mcp-gateway audit verify`` checks them); with
``audit.checkpoint``, a signed ``audit_checkpoint`` event follows every ``every`` events and
closes the chain when the sink closes (the last cleanup of a SIGTERM stop).

The schema (documented in ``docs/operations.md``) is fixed: it never carries the token, claim
sets or argument values; arguments appear only as a key -> type-name shape when
``logging.log_arguments`` is enabled.
"""

from __future__ import annotations

import logging
import logging.handlers
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol, TextIO

from gateway.config import AuditConfig
from gateway.config.audit_key import load_checkpoint_key
from gateway.observability.audit_chain import CHECKPOINT_EVENT, Chain, Signer
from gateway.observability.lines import json_line, stdout_writer

__all__ = [
    "AUDIT_LOGGER",
    "AuditEvent",
    "AuditSink",
    "Auditable",
    "CatalogEvent",
    "RevocationEvent",
    "rfc3339",
]

AUDIT_LOGGER: Final = "gateway.audit"
"""Name of the stdlib logger the audit trail is written to."""


@dataclass(slots=True)
class AuditEvent:
    """One ``tools/call``: who called which tool, the policy's verdict, and what happened.

    Built once per call and rendered at once (:meth:`to_json`): not frozen, because a frozen
    dataclass sets each of its fields through ``object.__setattr__``, which was a fifth of the
    observer's cost per call (issue 48)."""

    request_id: str
    trace_id: str
    subject: str | None
    """As configured by ``logging.subject``: plain, or its fingerprint."""
    client_id: str | None
    tool: str | None
    decision: Literal["allow", "deny", "none"]
    """``none``: refused before the policy ran (e.g. an unknown tool or a bad envelope)."""
    rule: str | None
    missing_scopes: tuple[str, ...]
    outcome: str
    """ok | tool_error | invalid_arguments | timeout | upstream_error | too_large | cancelled |
    input_required | input_refused | denied | rejected."""
    duration_ms: float
    backend_ms: float | None
    status: int
    jsonrpc_code: int | None = None
    error_row: str | None = None
    token_fp: str | None = None
    arguments: Mapping[str, str] | None = None
    backend: str | None = None
    """The backend that owns the tool (a configured name); None when the call never resolved
    to one (unknown or hidden tool, refused before the lookup): the key is then left out."""
    auth_method: str | None = None
    """How the token was checked (``introspection``, ``jwt``, ``jwt+introspection``)."""
    input: Mapping[str, Any] | None = None
    """A 2026-07-28 input round (:func:`input_record`): kinds and round numbers, never the
    requests' or answers' contents."""
    exchange: Mapping[str, Any] | None = None
    """The RFC 8693 token exchange of the call (:func:`exchange_record`)."""
    granted_scopes: tuple[str, ...] = ()
    """The caller's scopes the decision used, in the policy's vocabulary (``Decision``)."""
    issuer: str | None = None
    """The ``url`` of the issuer that accepted the token (several issuers, one policy)."""
    condition: str | None = None
    """``false`` or ``error`` when a ``when:`` condition of ``rule`` refused the call (it did
    not hold, or could not be evaluated); the key is left out otherwise. Never a value."""
    target: tuple[str, str, str] | None = None
    """A ``prompts/get`` or ``resources/read``: (event, field, value), e.g. ``("resource_read",
    "uri", "file:///docs/a.md")``; the event then has that field instead of ``tool``."""
    pdp: Mapping[str, Any] | None = None
    """What the external decision point said (:func:`pdp_record`), when one was asked."""
    guardrails: Sequence[Mapping[str, str]] | None = None
    """The verdicts of the rule's processors (:func:`guardrail_records`), when any was asked."""
    task: Mapping[str, Any] | None = None
    """A task created by the call, or the task a task request named (:func:`task_record`)."""
    event: str | None = None
    """The event name when it is not the tool call's (a task request: ``task_get`` ...)."""

    def to_json(self, ts: float) -> str:
        target = self.target
        record: dict[str, Any] = {
            "ts": rfc3339(ts),
            "log": "audit",
            "event": self.event or ("tool_call" if target is None else target[0]),
            "request_id": self.request_id,
            "trace_id": self.trace_id,
            "subject": self.subject,
            "client_id": self.client_id,
        }
        if target is None:
            record["tool"] = self.tool
        else:
            record[target[1]] = target[2]
        if self.backend is not None:
            record["backend"] = self.backend
        record |= {
            "decision": self.decision,
            "rule": self.rule,
            "granted_scopes": list(self.granted_scopes),
            "missing_scopes": list(self.missing_scopes),
            "outcome": self.outcome,
            "duration_ms": self.duration_ms,
            "backend_ms": self.backend_ms,
            "status": self.status,
            "jsonrpc_code": self.jsonrpc_code,
            "error_row": self.error_row,
            "token_fp": self.token_fp,
            "auth_method": self.auth_method,
            "issuer": self.issuer,
        }
        if self.condition is not None:
            record["condition"] = self.condition
        if self.arguments is not None:
            record["arguments"] = dict(self.arguments)
        if self.input is not None:
            record["input"] = dict(self.input)
        if self.exchange is not None:
            record["exchange"] = dict(self.exchange)
        if self.pdp is not None:
            record["pdp"] = dict(self.pdp)
        if self.guardrails is not None:
            record["guardrails"] = [dict(entry) for entry in self.guardrails]
        if self.task is not None:
            record["task"] = dict(self.task)
        return json_line(record)


@dataclass(frozen=True, slots=True)
class RevocationEvent:
    """One ``POST /admin/revoke``: which token (by fingerprint), until when, how far it reached."""

    request_id: str
    token_fp: str
    revocation_key: str
    """What was revoked (hex; never the token): for a JWT a hash of its issuer and ``jti`` (or
    of its signing input), for an opaque token its SHA-256."""
    until: float
    reached: str
    """``all_replicas``, ``this_replica`` (memory backend), ``this_replica_only`` (Redis
    failed)."""
    peer: str | None

    def to_json(self, ts: float) -> str:
        record = {
            "ts": rfc3339(ts),
            "log": "audit",
            "event": "token_revoked",
            "request_id": self.request_id,
            "token_fp": self.token_fp,
            "revocation_key": self.revocation_key,
            "until": rfc3339(self.until),
            "reached": self.reached,
            "peer": self.peer,
        }
        return json_line(record)


@dataclass(frozen=True, slots=True)
class CatalogEvent:
    """A catalog item that differs from the lock (``catalog.lock``): ``catalog_item_held``
    (hidden, ``on_change: hold``), ``catalog_item_flagged`` (served, ``warn``), or
    ``catalog_item_released`` (it matches the lock again: approved, or the backend reverted)."""

    event: str
    backend: str
    kind: str
    """``tool``, ``prompt`` or ``template``."""
    item: str
    change: str
    """``changed`` (another definition than the locked one) or ``new`` (not in the lock)."""
    sha256: str | None
    """The live definition's hash (released: the one now approved, or held before)."""
    locked_sha256: str | None
    lock_version: str

    def to_json(self, ts: float) -> str:
        record = {
            "ts": rfc3339(ts),
            "log": "audit",
            "event": self.event,
            "backend": self.backend,
            "kind": self.kind,
            "item": self.item,
            "change": self.change,
            "sha256": self.sha256,
            "locked_sha256": self.locked_sha256,
            "lock_version": self.lock_version,
        }
        return json_line(record)


def rfc3339(ts: float) -> str:
    """An event's ``ts``: RFC 3339 UTC with milliseconds and ``Z``, like the application log's
    timestamps: ``datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")`` with
    ``Z`` for ``+00:00``, the date and time formatted once per second (:class:`_Seconds`)."""
    frac, whole = math.modf(ts)
    if frac < 0.0:  # before 1970: not worth a shortcut
        return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
    # fromtimestamp's own rounding: the fraction to microseconds, half to even, carried over.
    micros = round(frac * 1e6)
    second = int(whole)
    if micros >= 1_000_000:
        micros -= 1_000_000
        second += 1
    return f"{_seconds(second)}.{micros // 1000:03d}Z"


class _Seconds:
    """The ``YYYY-MM-DDTHH:MM:SS`` of the last second asked for (one tuple: read and replaced
    whole, so a thread never sees one second's date with another's text)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: tuple[int, str] = (-1, "")

    def __call__(self, second: int) -> str:
        last = self.last
        if last[0] == second:
            return last[1]
        text = datetime.fromtimestamp(second, UTC).isoformat(timespec="seconds")[:-6]
        self.last = (second, text)
        return text


_seconds = _Seconds()


class Auditable(Protocol):
    """An event of the trail: its JSON line at Unix time ``ts`` (``"log": "audit"``, fixed
    schema). Layers define their own (the login surface's: ``gateway/login/login_events.py``)."""

    def to_json(self, ts: float) -> str: ...


class _MessageOnly(logging.Formatter):
    """The record's message is already the JSON line; add nothing around it."""

    def format(self, record: logging.LogRecord) -> str:
        return record.getMessage()


class AuditSink:
    """Writes :class:`AuditEvent` records to the configured sink.

    Build it once at startup with :meth:`from_config` and :meth:`close` it at shutdown (closes
    the file). Neither ``handler`` nor ``stream`` is the ``off`` sink.
    """

    def __init__(
        self,
        handler: logging.Handler | None,
        *,
        name: str = AUDIT_LOGGER,
        stream: TextIO | None = None,
        signer: Signer | None = None,
    ) -> None:
        self._handler = handler
        self._chain = Chain()
        self._signer = signer
        self._since_checkpoint = 0
        self._stream = stream
        """``stdout``: lines go straight to this stream (no logger, no record)."""
        self._logger = logging.getLogger(name)
        # Own logger, own handler: never through the root logger's structlog formatter.
        self._logger.propagate = False
        self._logger.setLevel(logging.INFO)
        self._logger.handlers[:] = [] if handler is None else [handler]
        if handler is not None:
            handler.setFormatter(_MessageOnly())

    @classmethod
    def from_config(cls, config: AuditConfig, *, stream: TextIO | None = None) -> AuditSink:
        """``stdout`` (or ``stream``), a rotating ``file``, or ``off``.

        Raises OSError when the file cannot be opened (fail at startup, not per request).
        """
        if config.sink == "off":
            return cls(None)
        signer = None
        if config.checkpoint is not None:
            key = load_checkpoint_key(config.checkpoint.key.reveal())
            signer = Signer(key, config.checkpoint.every)
        if config.sink == "file":
            if config.path is None:
                # config.load_config already refuses this; a hand-built AuditConfig may not.
                raise ValueError("audit.path is required with sink: file")
            return cls(
                logging.handlers.RotatingFileHandler(
                    config.path,
                    maxBytes=config.max_bytes,
                    backupCount=config.backups,
                    encoding="utf-8",
                ),
                signer=signer,
            )
        out: TextIO = stdout_writer() if stream is None else stream  # type: ignore[assignment]
        return cls(None, stream=out, signer=signer)

    @property
    def enabled(self) -> bool:
        return self._handler is not None or self._stream is not None

    @property
    def checkpoint_jwk(self) -> dict[str, Any] | None:
        """The checkpoint key's public JWK (for ``/.well-known/jwks.json``), None without one."""
        return None if self._signer is None or not self.enabled else dict(self._signer.jwk)

    def emit(self, event: Auditable, ts: float) -> None:
        """Write one event (``ts`` is Unix time). Write errors are reported on stderr (the
        file handler's ``handleError``, the line writer's report), never raised into the
        request."""
        stream = self._stream
        if stream is None and self._handler is None:
            return
        rendered = event.to_json(ts)
        chain = self._chain
        with chain.lock:  # link order = write order (the line writer keeps it to the stream)
            self._write(chain.link(rendered))
            signer = self._signer
            if signer is not None:
                self._since_checkpoint += 1
                if self._since_checkpoint >= signer.every:
                    self._checkpoint(signer, ts, final=False)

    def _write(self, line: str) -> None:
        stream = self._stream
        if stream is not None:
            try:
                stream.write(line + "\n")
            except (OSError, ValueError) as exc:
                sys.stderr.write(f"audit event not written: {exc!r}\n")
        elif self._handler is not None:
            self._logger.info(line)

    def _checkpoint(self, signer: Signer, ts: float, *, final: bool) -> None:
        """A signed ``audit_checkpoint`` (chain lock held): ``events`` is how many events of
        the chain precede it, ``every`` the cadence (``audit verify`` holds the chain to it:
        a file declares how many of its last events may be unsigned)."""
        record = {
            "ts": rfc3339(ts),
            "log": "audit",
            "event": CHECKPOINT_EVENT,
            "kid": signer.kid,
            "final": final,
            "events": self._chain.seq,
            "every": signer.every,
        }
        self._write(self._chain.link(json_line(record), signer.sign))
        self._since_checkpoint = 0

    def close(self) -> None:
        """Write the final checkpoint (with a key), then flush and close."""
        signer, self._signer = self._signer, None
        if signer is not None and self.enabled:
            with self._chain.lock:
                self._checkpoint(signer, time.time(), final=True)
        stream, self._stream = self._stream, None
        if stream is not None:
            flush_now = getattr(stream, "flush_now", None)
            (flush_now or stream.flush)()
        if self._handler is not None:
            self._logger.removeHandler(self._handler)
            self._handler.close()
            self._handler = None
