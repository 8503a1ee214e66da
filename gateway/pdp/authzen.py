"""An OpenID AuthZEN Authorization API 1.0 Access Evaluation client (``policy_external:``).

Consulted after the local policy allowed a ``tools/call``, ``prompts/get`` or
``resources/read``, so it can only narrow. One ``POST`` of an Access Evaluation request
(AuthZEN 1.0 §6.1: ``subject``, ``action``, ``resource`` REQUIRED, ``context`` OPTIONAL; the
entities of §5: ``subject``/``resource`` carry ``type`` and ``id`` and OPTIONAL ``properties``,
``action`` a ``name``) to the configured URL, whose answer (§6.2) must be a JSON object with a
boolean ``decision``; its optional ``context`` (reasons, some meant only for administrators) is
never relayed. The mapping follows the AuthZEN MCP profile proposal (openid/authzen#429):

* ``subject``: ``{type: subject_type, id: sub, properties: {issuer, client_id, scopes,
  auth_method, actor, ...subject_properties}}``: facts the gateway established from the
  validated token, never the token itself (it does not leave the gateway this way);
* ``action``: ``{name: "tools/call" | "prompts/get" | "resources/read"}``;
* ``resource``: ``{type: "mcp_tool" | "mcp_prompt" | "mcp_resource", id: name or URI (its
  normal form, :func:`gateway.policy.uri.normalize_uri`, as the local policy decided on it),
  properties: {backend, arguments (only with send_arguments)}}``;
* ``context``: ``{resource_server: <the gateway's resource URI>}``.

**Cache**: the decision (allow or deny, never a failure) is kept for ``cache.ttl_s`` under the
SHA-256 of the canonical request body, which holds every fact sent (subject and its properties,
client, action, resource, the arguments when sent): a different fact is a different question.
At most ``cache.max_entries`` (least recently used first out). Concurrent identical questions
share one request (single-flight).

**Failures** (unreachable, slower than ``timeout_s`` or the request's deadline, a status other
than 200, a body that is not a decision) deny as ``policy_unavailable`` (503, ``Retry-After``),
or under ``on_error: allow_local`` let the local policy's allow stand (counted, audited).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import time
from collections.abc import Callable
from typing import Any, Final

from gateway.bounded import BoundedMap
from gateway.config import PolicyExternalConfig
from gateway.errors import ExternalPolicyDenied, PolicyUnavailable
from gateway.flights import SingleFlight
from gateway.jsonkit.read import JsonError, answer
from gateway.jsonkit.write import compact
from gateway.observability.logging import get_logger
from gateway.observability.metrics import Metrics
from gateway.outbound.client import Destination, Outbound
from gateway.outbound.failures import OutboundError
from gateway.policy.glob import Glob
from gateway.policy.uri import normalize_uri
from gateway.seams import AccessQuestion, Asking, Principal, find_claim

__all__ = ["PDP_DESTINATION", "RESOURCE_TYPES", "AuthZenDecisionPoint"]

PDP_DESTINATION: Final = "policy_external"
RESOURCE_TYPES: Final = {
    "tools/call": "mcp_tool",
    "prompts/get": "mcp_prompt",
    "resources/read": "mcp_resource",
}
"""``resource.type`` per MCP method."""
_MAX_RESPONSE: Final = 65_536
_SPAN: Final = "mcp_gateway.policy_external"

_log = get_logger("gateway.pdp")


class AuthZenDecisionPoint:
    """The :class:`~gateway.seams.DecisionPoint` of ``policy_external`` (module docstring)."""

    def __init__(
        self,
        config: PolicyExternalConfig,
        resource: str,
        outbound: Outbound,
        *,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._resource = resource
        self._outbound = outbound
        self._clock = clock
        self._metrics = metrics
        self._destination: Destination | None = Destination(
            PDP_DESTINATION,
            connect_timeout_s=min(3.0, config.timeout_s),
            max_connections=config.max_connections,
        )
        """Added to the pool on first use: its session needs the running loop, and wiring
        builds the services before the loop runs."""
        self._tools = (
            None if config.tools is None else tuple(Glob(pattern) for pattern in config.tools)
        )
        self._cache: BoundedMap[bytes, bool] = BoundedMap(max(1, config.cache_max_entries))
        self._flights: SingleFlight[bool | None] = SingleFlight()
        self._counters = (
            {
                outcome: metrics.policy_external_decisions_total.labels(outcome=outcome)
                for outcome in ("allow", "deny", "error", "cache_hit")
            }
            if metrics is not None
            else {}
        )
        if metrics is not None:
            metrics.register_policy_external()
        self.requests = 0
        """Evaluation requests sent so far (tests)."""

    def __len__(self) -> int:
        return len(self._cache)

    async def consult(self, asking: Asking, question: AccessQuestion) -> None:
        if question.action not in self._config.methods:
            return  # policy_external.methods: this one is the local policy's alone
        if (
            self._tools is not None
            and question.action == "tools/call"
            and not any(glob.matches(question.target) for glob in self._tools)
        ):
            return  # policy_external.tools: not one of the tools the PDP decides on
        body = self.request_body(asking.principal, question)
        key = hashlib.sha256(body).digest()
        allowed, cached = self._cached(key), True
        if allowed is None:
            cached = False
            flight = self._flights.joining(key)
            if flight is None:
                request_id, deadline = asking.ctx.request_id, asking.deadline
                flight = self._flights.start(
                    key, lambda: self._ask(body, key, deadline, request_id)
                )
            # Shielded: a caller that goes away does not cancel the question the others wait for.
            allowed = await asyncio.shield(flight)
        outcome = (
            "cache_hit"
            if cached
            else ("error" if allowed is None else ("allow" if allowed else "deny"))
        )
        self._count(outcome)
        ctx = asking.ctx
        ctx.extra["pdp"] = {
            "decision": "error" if allowed is None else ("allow" if allowed else "deny"),
            "cached": cached,
        }
        if allowed is None:
            if self._config.on_error == "allow_local":
                ctx.extra["pdp"]["fallback"] = "allow_local"
                return
            raise PolicyUnavailable(retry_after=self._config.retry_after_s)
        if not allowed:
            if ctx.decision is not None:  # the audit trail's verdict: denied, and by whom
                ctx.decision = dataclasses.replace(ctx.decision, allowed=False, reason="external")
            raise ExternalPolicyDenied()

    def request_body(self, principal: Principal, question: AccessQuestion) -> bytes:
        """The canonical Access Evaluation request (AuthZEN 1.0 §6.1): sorted keys, compact."""
        config = self._config
        subject: dict[str, Any] = {
            "issuer": principal.issuer,
            "scopes": sorted(principal.scopes),
            "auth_method": principal.auth_method,
        }
        if principal.client_id is not None:
            subject["client_id"] = principal.client_id
        if principal.actor is not None:
            subject["actor"] = principal.actor
        for name, claim in config.subject_properties:
            found, value = find_claim(principal.claims, claim)
            if found:
                subject[name] = value
        target = question.target
        if question.action == "resources/read":
            # The form the local policy decided on: two spellings of one URI (``/a/../b``,
            # ``%7E``) must meet the same external rule too.
            target = normalize_uri(target) or target
        resource: dict[str, Any] = {}
        if question.backend:
            resource["backend"] = question.backend
        if config.send_arguments and question.arguments is not None:
            resource["arguments"] = question.arguments
        request = {
            "subject": {
                "type": config.subject_type,
                "id": principal.subject,
                "properties": subject,
            },
            "action": {"name": question.action},
            "resource": {
                "type": RESOURCE_TYPES[question.action],
                "id": target,
                **({"properties": resource} if resource else {}),
            },
            "context": {"resource_server": self._resource},
        }
        # The hot path's encoder: this runs on every consultation (the cache key is the body's
        # hash), cache hits included.
        return compact(request, sort_keys=True)

    def _cached(self, key: bytes) -> bool | None:
        return self._cache.get(key, self._clock())

    async def _ask(self, body: bytes, key: bytes, deadline: float, request_id: str) -> bool | None:
        """One evaluation request: the decision, or None when there is none to be had."""
        config = self._config
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            # AuthZEN 1.0 (HTTPS binding, request identification): the PEP's id for the
            # request, here the gateway's own, so the PDP's log meets the access line.
            "X-Request-ID": request_id,
        }
        authorization = self._authorization()
        if authorization is not None:
            headers["Authorization"] = authorization
        timeout = min(config.timeout_s, deadline - time.monotonic())
        if timeout <= 0:
            _log.warning("policy_external_failed", reason="deadline")
            return None
        if self._destination is not None:
            self._outbound.add(self._destination)
            self._destination = None
        self.requests += 1
        began = time.monotonic()
        try:
            response = await self._outbound.request(
                PDP_DESTINATION,
                "POST",
                config.url,
                timeout_s=timeout,
                headers=headers,
                body=body,
                max_body=_MAX_RESPONSE,
                span=_SPAN,
            )
        except OutboundError as exc:
            _log.warning("policy_external_failed", reason=type(exc).__name__)
            return None
        finally:
            if self._metrics is not None:
                self._metrics.policy_external_duration_seconds.observe(time.monotonic() - began)
        decision = _decision(response.status, response.content_type, response.body)
        if decision is None:
            # The status only: a PDP's body may carry its own diagnostics about the subject.
            _log.warning("policy_external_failed", reason="not_a_decision", status=response.status)
            return None
        if config.cache_ttl_s > 0:
            self._cache.put(key, decision, self._clock() + config.cache_ttl_s)
        return decision

    def _authorization(self) -> str | None:
        credential = self._config.credential
        if credential is None:
            return None
        if credential.type == "bearer":
            assert credential.token is not None  # the schema requires it
            return f"Bearer {credential.token.current()}"
        assert credential.password is not None
        pair = f"{credential.username}:{credential.password.current()}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")  # RFC 7617 §2

    def _count(self, outcome: str) -> None:
        counter = self._counters.get(outcome)
        if counter is not None:
            counter.inc()

    async def close(self) -> None:
        await self._flights.cancel_all()


def _decision(status: int, content_type: str, body: bytes) -> bool | None:
    """AuthZEN 1.0 §6.2: HTTP 200 and a JSON object (``application/json``, read strictly: a
    second ``decision`` member must not overrule the first) whose ``decision`` is a boolean."""
    if status != 200:
        return None
    try:
        found = answer(content_type, body)
    except JsonError:
        return None
    decision = found.get("decision")
    return decision if isinstance(decision, bool) else None
