"""One configured processor (an entry of ``guardrails:``): a ``POST`` of the message under its
deadline and body cap, with the gateway's own credential, and the verdict read back strictly.

Every failure is a fixed reason (:data:`FAILURES`), logged with the processor's name and the
status when there is one, counted in ``guardrail_errors_total{guardrail, reason}``; the body
of a message or an answer is never logged (it is content). The duration of each exchange is
``guardrail_duration_seconds{guardrail}``.
"""

from __future__ import annotations

import time
from typing import Final, Protocol

from gateway.config import GuardrailConfig
from gateway.guardrails.exchange import Verdict, read_verdict
from gateway.observability.logging import get_logger
from gateway.observability.metric_labels import GUARDRAIL_FAILURES
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Destination, Outbound
from gateway.outbound.failures import OutboundError, OutboundTimeout, ResponseTooLarge
from gateway.seams import GuardedContent

__all__ = ["FAILURES", "Processor", "ServiceToken"]

FAILURES: Final = GUARDRAIL_FAILURES
"""Why a processor could not answer: ``timeout`` (its ``timeout_s``, or the request's deadline,
ran out), ``unreachable``, ``status`` (not 200), ``malformed`` (not a verdict), ``too_large``
(the message or the answer over ``max_body_bytes``), ``credential`` (the gateway's own could
not be had)."""
_SPAN: Final = "mcp_gateway.guardrail"

_log = get_logger("gateway.guardrails")


class ServiceToken(Protocol):
    """The gateway's credential at a processor: the backends' service credential
    (``gateway.backend.credentials``), handed in by wiring."""

    async def token(self, deadline: float) -> str: ...

    def invalidate(self, token: str) -> bool: ...


class Processor:
    """The client of one processor."""

    def __init__(
        self,
        config: GuardrailConfig,
        outbound: Outbound,
        *,
        credential: ServiceToken | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.name = config.name
        self.checks = config.checks
        self.claims = config.claims
        self.fails_open = config.on_error == "allow"
        self._config = config
        self._outbound = outbound
        self._credential = credential
        self._destination_name = f"guardrail:{config.name}"
        self._destination: Destination | None = Destination(
            self._destination_name,
            connect_timeout_s=min(3.0, config.timeout_s),
            max_connections=config.max_connections,
        )
        """Added to the pool on first use: its session needs the running loop."""
        self._duration = (
            metrics.guardrails.duration_seconds.labels(guardrail=config.name)
            if metrics is not None
            else None
        )
        self._errors = (
            {
                reason: metrics.guardrails.errors_total.labels(guardrail=config.name, reason=reason)
                for reason in FAILURES
            }
            if metrics is not None
            else {}
        )

    async def ask(
        self, body: bytes, content: GuardedContent, deadline: float, request_id: str
    ) -> Verdict | str:
        """The processor's verdict on ``body`` (the message about ``content``), or the reason
        (one of :data:`FAILURES`) it could not be had."""
        config = self._config
        if len(body) > config.max_body_bytes:
            return self._failed("too_large")
        timeout = min(config.timeout_s, deadline - time.monotonic())
        if timeout <= 0:
            return self._failed("timeout")
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "X-Request-ID": request_id,  # the processor's log meets the gateway's access line
        }
        token = None
        if self._credential is not None:
            try:
                token = await self._credential.token(time.monotonic() + timeout)
            except Exception:  # any failure to get it is the same refusal
                return self._failed("credential")
            headers["Authorization"] = f"Bearer {token}"
            timeout = min(timeout, deadline - time.monotonic())
            if timeout <= 0:
                return self._failed("timeout")
        if self._destination is not None:
            self._outbound.add(self._destination)
            self._destination = None
        began = time.monotonic()
        try:
            response = await self._outbound.request(
                self._destination_name,
                "POST",
                config.url,
                timeout_s=timeout,
                headers=headers,
                body=body,
                max_body=config.max_body_bytes,
                span=_SPAN,
            )
        except OutboundTimeout:
            return self._failed("timeout")
        except ResponseTooLarge:
            return self._failed("too_large")
        except OutboundError as exc:
            return self._failed("unreachable", error=type(exc).__name__)
        finally:
            if self._duration is not None:
                self._duration.observe(time.monotonic() - began)
        if response.status == 401 and token is not None and self._credential is not None:
            self._credential.invalidate(token)  # a rotated or expired one: fetched anew next
        verdict = read_verdict(response.status, response.content_type, response.body, content)
        if verdict is None:
            reason = "status" if response.status != 200 else "malformed"
            return self._failed(reason, status=response.status)
        return verdict

    def _failed(self, reason: str, *, status: int | None = None, error: str | None = None) -> str:
        counter = self._errors.get(reason)
        if counter is not None:
            counter.inc()
        _log.warning(
            "guardrail_failed",
            guardrail=self.name,
            reason=reason,
            **({"status": status} if status is not None else {}),
            **({"error": error} if error is not None else {}),
        )
        return reason
