"""Guardrails (``guardrails:``): named content processors a policy rule selects, shown a
``tools/call``'s arguments, its result and the answers to its input requests, a ``prompts/get``
or a ``resources/read`` result, each answering pass, deny or a changed copy
(docs/policy.md#guardrails).

:mod:`~gateway.guardrails.exchange` is the message and the verdict (agentgateway's ExtMCP as
JSON), :mod:`~gateway.guardrails.processor` one processor's client, :mod:`~gateway.guardrails.chain`
the :class:`~gateway.seams.Guardrails` the routes call, in ``http/``, after everything local
allowed. Built by :mod:`gateway.wiring` only when configured; its one HTTP client is
:mod:`gateway.outbound`."""
