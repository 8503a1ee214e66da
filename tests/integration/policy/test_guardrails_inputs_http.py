"""Guardrails on the answers to a tool's input requests (2026-07-28 input rounds): a user's
elicitation answer and a client's sampling completion are content too. The retry's sealed state
is checked first; then each answer is shown to the rule's processors (``check:
input_answers``, ``method``: the input request's), which pass, deny or change it, and a change
must still be a valid answer of its kind. Nothing goes upstream before they all said so."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.guardrail_service import GuardrailService, guardrail_service, replace_with
from tests.support.input_stack import ALL_CAPS, SCOPES, call, input_stack
from tests.support.input_upstream import retries
from tests.support.live_stack import MakeStack, ServerFactory, audit_events
from tests.support.task_stack import POLICY as TASK_POLICY
from tests.support.task_stack import SCOPES as TASK_SCOPES
from tests.support.task_stack import call as task_call
from tests.support.task_stack import task_stack
from tests.support.task_upstream import TASKS

ANSWER = "CARD-4111-1111-1111-1111"
POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  summarize: {scopes: [tools:input], guardrails: [answers]}
  confirm_delete: {scopes: [tools:input], guardrails: [answers]}
"""


def _decide(message: dict[str, Any]) -> dict[str, Any]:
    context = message["metadataContext"]
    if context["check"] != "input_answers":
        return {"pass": {}}
    answer = message["mcpResponse"]
    if message["method"] == "sampling/createMessage":
        text = answer["content"]["text"].replace(ANSWER, "[card]")
        return {"mutated": {**answer, "content": {"type": "text", "text": text}}}
    if answer.get("content", {}).get("confirm") is True:
        return {"error": {"code": "PERMISSION_DENIED", "reason": "deleting needs a ticket"}}
    return {"pass": {}}


def _sampled() -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": {"type": "text", "text": f"pay with {ANSWER}"},
        "model": "m",
    }


@pytest.mark.row("guardrail_denied")
async def test_answers_to_input_requests_pass_the_processors_before_the_retry_goes_upstream(
    aiohttp_server: ServerFactory, make_stack: MakeStack
) -> None:
    async with (
        guardrail_service(aiohttp_server, GuardrailService(_decide)) as g,
    ):
        extra = {
            "guardrails": {
                "answers": {
                    "url": g.url,
                    "allow_insecure_http": True,
                    "checks": ["input_answers"],
                }
            }
        }
        async with make_stack.of(input_stack, policy=POLICY, extra=extra) as stack:
            token = stack.token(SCOPES)
            _, _, first = await call(stack, token, "summarize", {"text": "long"})
            state = first["result"]["requestState"]
            status, _, done = await call(
                stack,
                token,
                "summarize",
                {"text": "long"},
                state=state,
                responses={"summary": _sampled()},
                rid=2,
            )
            assert status == 200, done
            assert done["result"]["content"][0]["text"] == "Summary: pay with [card]"
            # The backend got the changed answer, never the card number.
            assert ANSWER not in json.dumps(retries(stack.upstream))
            (shown,) = g.seen
            assert (shown.body["phase"], shown.body["method"]) == (
                "response",
                "sampling/createMessage",
            )
            assert shown.body["metadataContext"]["target"] == "summarize"
            # An answer the processor refuses: 403, and the retry never reaches the backend.
            _, _, first = await call(stack, token, "confirm_delete", {"path": "/tmp/x"})
            sent = len(retries(stack.upstream))
            status, headers, text = await stack.modern(
                token,
                "tools/call",
                {
                    "name": "confirm_delete",
                    "arguments": {"path": "/tmp/x"},
                    "requestState": first["result"]["requestState"],
                    "inputResponses": {
                        "confirm": {"action": "accept", "content": {"confirm": True}}
                    },
                },
                capabilities=ALL_CAPS,
                rid=3,
            )
            assert status == 403 and "WWW-Authenticate" not in headers, text
            assert json.loads(text)["error"]["data"] == {
                "guardrail": "answers",
                "verdict": "deny",
                "reason": "deleting needs a ticket",
            }
            assert len(retries(stack.upstream)) == sent
            refused = [e for e in audit_events(stack) if e.get("error_row")][-1]
            assert refused["guardrails"] == [
                {"guardrail": "answers", "check": "input_answers", "verdict": "deny"}
            ]
            assert refused["input"]["answered"] == ["elicitation/create"]


async def test_a_changed_answer_must_still_answer_what_was_asked(
    aiohttp_server: ServerFactory, make_stack: MakeStack
) -> None:
    async with guardrail_service(aiohttp_server, GuardrailService(replace_with({"x": 1}))) as g:
        extra = {
            "guardrails": {
                "answers": {
                    "url": g.url,
                    "allow_insecure_http": True,
                    "checks": ["input_answers"],
                }
            }
        }
        async with make_stack.of(input_stack, policy=POLICY, extra=extra) as stack:
            token = stack.token(SCOPES)
            _, _, first = await call(stack, token, "summarize", {"text": "long"})
            status, _, refused = await call(
                stack,
                token,
                "summarize",
                {"text": "long"},
                state=first["result"]["requestState"],
                responses={"summary": _sampled()},
                rid=2,
            )
            assert status == 403
            assert refused["error"]["data"] == {"guardrail": "answers", "verdict": "invalid"}
            assert len(retries(stack.upstream)) == 1  # only the first round went upstream


async def test_a_guarded_call_never_becomes_a_task(
    aiohttp_server: ServerFactory, make_stack: MakeStack
) -> None:
    # The rule says tasks: true and the client declares the extension; the result must still
    # pass the processor in this answer, so the backend never hears of the extension.
    policy = TASK_POLICY.replace("tasks: true}", "tasks: true, guardrails: [answers]}")
    async with guardrail_service(aiohttp_server) as g:
        extra = {"guardrails": {"answers": {"url": g.url, "allow_insecure_http": True}}}
        async with make_stack.of(task_stack, policy=policy, gateway=extra) as stack:
            status, _, body = await task_call(
                stack, stack.token(TASK_SCOPES), "slow_compute", {"seconds": 0}
            )
            assert status == 200 and body["result"]["resultType"] == "complete", body
            sent = stack.upstream.calls("tools/call")[-1].json["params"]["_meta"]
            assert TASKS not in json.dumps(sent)
            assert g.checks() == ["tool_arguments", "tool_result"]
