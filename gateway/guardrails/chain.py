"""The :class:`~gateway.seams.Guardrails` of ``guardrails:``: the processors a rule names, in
order, each shown the previous one's change.

A processor's verdict (:mod:`gateway.guardrails.exchange`):

* ``pass``: the content goes on as it is;
* ``error``: refused, ``guardrail_denied`` (403, ``verdict: deny``, the processor's reason);
* ``mutated``: the change is checked as the backend layer checks what an upstream sends
  (:class:`ContentChecks`): arguments against the tool's ``inputSchema``, a result through the
  result checks of its method, an answer through the input-request answer checks. A change
  that fails is refused (``verdict: invalid``) whatever ``on_error`` says: a processor that
  meant to redact must not have its content pass unredacted. (That a change does not widen
  what the policy allowed is checked where the policy is: the routes re-check closed arguments
  and ``when:`` conditions on changed arguments.)
* none (:data:`~gateway.guardrails.processor.FAILURES`): ``on_error: deny`` refuses
  (``verdict: unavailable``), ``on_error: allow`` lets the content pass unchecked.

Each verdict is counted in ``guardrail_verdicts_total{guardrail, check, verdict}`` and noted in
``RequestContext.extra["guardrails"]`` for the audit event (name, check, verdict, and
``fallback: allow``), never the content or the reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from gateway.bounded import BoundedMap
from gateway.errors import GuardrailDenied, InvalidRequestState
from gateway.guardrails.exchange import message
from gateway.guardrails.processor import Processor
from gateway.jsonkit.write import canonical, plain_copy
from gateway.observability.metric_labels import GUARDRAIL_VERDICTS
from gateway.observability.metrics import Metrics
from gateway.protocol.input_required import check_input_responses
from gateway.seams import Asking, GuardedContent, RequestContext

__all__ = ["GUARDRAILS_KEY", "MAX_RECORDS", "ContentChecks", "GuardrailChain", "Validator"]

GUARDRAILS_KEY: Final = "guardrails"
"""``RequestContext.extra`` key of the verdicts the audit event carries."""
MAX_RECORDS: Final = 32
"""Verdicts noted per request (a retry answering many input requests is bounded too)."""
_SCHEMAS: Final = 256
"""Compiled ``inputSchema`` validators kept (changed arguments are rare; schemas few)."""


class Validator(Protocol):
    """A compiled JSON Schema (jsonschema-rs)."""

    def is_valid(self, instance: Any) -> bool: ...


@dataclass(frozen=True, slots=True)
class ContentChecks:
    """The backend layer's checks of what an upstream sends, handed in by wiring (this package
    does not import the backend layer): each returns the checked plain copy, or None."""

    tool_result: Callable[[Mapping[str, Any]], dict[str, Any] | None]
    prompt_result: Callable[[Any], dict[str, Any] | None]
    resource_result: Callable[[Any], dict[str, Any] | None]
    compile_schema: Callable[[Mapping[str, Any]], Validator]
    """A tool's ``inputSchema`` compiled as the catalog compiles it (raises ValueError)."""


class GuardrailChain:
    """Implements :class:`gateway.seams.Guardrails` over the configured processors."""

    def __init__(
        self,
        processors: Mapping[str, Processor],
        checks: ContentChecks,
        *,
        metrics: Metrics | None = None,
    ) -> None:
        self._processors = dict(processors)
        self._checks = checks
        self._schemas: BoundedMap[bytes, Validator] = BoundedMap(_SCHEMAS)
        self._counters: dict[tuple[str, str, str], Any] = {}
        if metrics is not None:
            for name, processor in self._processors.items():
                metrics.guardrails.register(name, sorted(processor.checks))
                for check in processor.checks:
                    for verdict in GUARDRAIL_VERDICTS:
                        key = (name, check, verdict)
                        self._counters[key] = metrics.guardrails.verdicts_total.labels(*key)

    async def check(
        self, names: tuple[str, ...], content: GuardedContent, asking: Asking
    ) -> Mapping[str, Any] | None:
        ctx, current, changed = asking.ctx, content, False
        for name in names:
            processor = self._processors.get(name)
            if processor is None:  # a policy loaded without the names checked (never served)
                self._note(ctx, name, content, "error")
                raise GuardrailDenied(guardrail=name, verdict="unavailable")
            if content.check not in processor.checks:
                continue
            body = message(
                current, asking.principal, claims=processor.claims, request_id=ctx.request_id
            )
            verdict = await processor.ask(body, current, asking.deadline, ctx.request_id)
            if isinstance(verdict, str):  # no verdict to be had
                if processor.fails_open:
                    self._note(ctx, name, content, "error", fallback=True)
                    continue
                self._note(ctx, name, content, "error")
                raise GuardrailDenied(guardrail=name, verdict="unavailable")
            if verdict.kind == "pass":
                self._note(ctx, name, content, "pass")
                continue
            if verdict.kind == "deny":
                self._note(ctx, name, content, "deny")
                raise GuardrailDenied(guardrail=name, verdict="deny", reason=verdict.reason)
            valid = None if verdict.changed is None else self._valid(current, verdict.changed)
            if valid is None:  # a change of the wrong form, or one that fails its checks
                self._note(ctx, name, content, "invalid")
                raise GuardrailDenied(guardrail=name, verdict="invalid")
            self._note(ctx, name, content, "mutate")
            current, changed = dataclasses.replace(current, content=valid), True
        return current.content if changed else None

    def _valid(self, content: GuardedContent, changed: Mapping[str, Any]) -> dict[str, Any] | None:
        """``changed`` checked for its kind (a plain copy), or None."""
        check = content.check
        if check == "tool_result":
            return self._checks.tool_result(changed)
        if check == "prompt_result":
            return self._checks.prompt_result(changed)
        if check == "resource_result":
            return self._checks.resource_result(changed)
        if check == "input_answers":
            try:
                kept = check_input_responses({"answer": changed}, {"answer": content.method})
            except InvalidRequestState:
                return None
            answer = kept.get("answer")
            return answer if isinstance(answer, dict) else None
        arguments: dict[str, Any] = plain_copy(changed)
        validator = self._validator(content)
        return arguments if validator is not None and validator.is_valid(arguments) else None

    def _validator(self, content: GuardedContent) -> Validator | None:
        """The tool's ``inputSchema`` as clients see it (its override applied), compiled once."""
        tool = content.tool
        schema = tool.definition.get("inputSchema") if tool is not None else None
        if not isinstance(schema, Mapping):
            return None
        key = hashlib.sha256(canonical(schema)).digest()
        found = self._schemas.get(key)
        if found is None:
            try:
                found = self._checks.compile_schema(schema)
            except ValueError:
                return None
            self._schemas.put(key, found)
        return found

    def _note(
        self,
        ctx: RequestContext,
        name: str,
        content: GuardedContent,
        verdict: str,
        *,
        fallback: bool = False,
    ) -> None:
        counter = self._counters.get((name, content.check, verdict))
        if counter is not None:
            counter.inc()
        records = ctx.extra.setdefault(GUARDRAILS_KEY, [])
        if len(records) < MAX_RECORDS:
            record = {"guardrail": name, "check": content.check, "verdict": verdict}
            if fallback:
                record["fallback"] = "allow"
            records.append(record)
