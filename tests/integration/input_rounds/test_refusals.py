"""What the gateway refuses in an input round, and that nothing reaches the upstream then.

MCP 2026-07-28 basic/patterns/mrtr.mdx §Server Requirements: ``requestState`` is
attacker-controlled and state that fails verification MUST be rejected; replay across users,
requests and time SHOULD be prevented. Every tampering case is the ``invalid_request_state`` row
(400, -32602, a fixed message per case) and the recorded upstream traffic shows the retry never
left the gateway. Also: legacy clients, undeclared capabilities (-32021), the round limit, an
upstream round of the wrong shape, relaying switched off, and a policy change between rounds.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, cast

import pytest

from gateway.backend.upstream.tool_results import FAILED_TEXT
from gateway.protocol.input_required import (
    DISABLED_TEXT,
    LEGACY_CLIENT_TEXT,
    TOO_MANY_ROUNDS_TEXT,
)
from gateway.protocol.sealed_state import Claims, arguments_digest
from tests.support.input_stack import (
    KEY_B,
    POLICY,
    SCOPES,
    call,
    forge,
    input_stack,
)
from tests.support.input_upstream import InputUpstream, form, retries
from tests.support.live_stack import LiveStack, MakeStack, audit_events
from tests.support.schemas import validate_response

CONFIRM = {"confirm": {"action": "accept", "content": {"confirm": True}}}
ARGS = {"path": "/tmp/x"}


def assert_row(status: int, headers: dict[str, str], body: dict[str, Any], message: str) -> None:
    assert status == 400, body
    assert headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "no-store"
    validate_response("2026-07-28", body)
    assert body["error"] == {"code": -32602, "message": message}


async def first_round(stack: LiveStack, token: str, tool: str = "confirm_delete") -> str:
    status, _, body = await call(stack, token, tool, ARGS if tool == "confirm_delete" else {})
    assert status == 200 and body["result"]["resultType"] == "input_required", body
    return cast(str, body["result"]["requestState"])


def genuine_claims(stack: LiveStack, **changes: Any) -> Claims:
    now = int(time.time())
    claims = Claims(
        subject="erin",
        issuer=stack.issuer.url,
        client_id="demo-cli",
        tool="confirm_delete",
        backend="default",
        arguments=arguments_digest(ARGS),
        policy_version="any",
        issued_at=now,
        expires_at=now + 600,
        round=1,
        requests={"confirm": "elicitation/create"},
        state="up:confirm_delete:1",
    )
    return dataclasses.replace(claims, **changes)


@pytest.fixture
async def stack(make_stack: MakeStack) -> Any:
    async with make_stack.of(input_stack, settings={"max_input_response_bytes": 1024}) as live:
        yield live


class TestTampering:
    @pytest.mark.row("invalid_request_state")
    async def test_state_of_user_a_replayed_by_user_b(self, stack: LiveStack) -> None:
        sealed = await first_round(stack, stack.token(SCOPES, sub="alice"))
        before = len(retries(stack.upstream))
        status, headers, body = await call(
            stack,
            stack.token(SCOPES, sub="bob"),
            "confirm_delete",
            ARGS,
            state=sealed,
            responses=CONFIRM,
            rid=2,
        )
        assert_row(status, headers, body, "requestState does not match this request")
        assert body["id"] == 2
        assert len(retries(stack.upstream)) == before

    @pytest.mark.row("invalid_request_state")
    async def test_the_same_user_with_another_client(self, stack: LiveStack) -> None:
        sealed = await first_round(stack, stack.token(SCOPES, sub="alice"))
        other = stack.issuer.mint_token(
            sub="alice", client_id="other-app", scopes=SCOPES, audience=stack.config.resource
        )
        status, headers, body = await call(
            stack, other, "confirm_delete", ARGS, state=sealed, responses=CONFIRM, rid=2
        )
        assert_row(status, headers, body, "requestState does not match this request")
        assert len(retries(stack.upstream)) == 1

    @pytest.mark.row("invalid_request_state")
    async def test_replay_against_another_tool(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES)
        sealed = await first_round(stack, token)
        status, headers, body = await call(
            stack, token, "workspace", {}, state=sealed, responses=CONFIRM, rid=2
        )
        assert_row(status, headers, body, "requestState does not match this request")
        assert len(retries(stack.upstream)) == 1

    @pytest.mark.row("invalid_request_state")
    async def test_changed_arguments(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES)
        sealed = await first_round(stack, token)
        status, headers, body = await call(
            stack, token, "confirm_delete", {"path": "/etc"}, state=sealed, responses=CONFIRM
        )
        assert_row(status, headers, body, "requestState does not match this request")
        assert len(retries(stack.upstream)) == 1

    @pytest.mark.row("invalid_request_state")
    async def test_expired(self, stack: LiveStack) -> None:
        # Sealed with the gateway's own key and every binding right, only the expiry passed.
        now = int(time.time())
        expired = forge(stack, genuine_claims(stack, issued_at=now - 700, expires_at=now - 1))
        fresh = forge(stack, genuine_claims(stack))
        token = stack.token(SCOPES, sub="erin")
        status, headers, body = await call(
            stack, token, "confirm_delete", ARGS, state=expired, responses=CONFIRM
        )
        assert_row(status, headers, body, "Expired requestState: call the tool again without it")
        assert retries(stack.upstream) == []
        # The same claims before expiry are accepted: the forged states are genuine.
        status, _, done = await call(
            stack, token, "confirm_delete", ARGS, state=fresh, responses=CONFIRM
        )
        assert status == 200 and done["result"]["content"][0]["text"] == "Deleted /tmp/x"

    @pytest.mark.row("invalid_request_state")
    async def test_bit_flipped(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES)
        sealed = await first_round(stack, token)
        middle = len(sealed) // 2
        flipped = sealed[:middle] + ("A" if sealed[middle] != "A" else "B") + sealed[middle + 1 :]
        for forged in (flipped, sealed + "-TAMPERED", sealed[:-4], "eyJub3QiOiJvdXJzIn0"):
            status, headers, body = await call(
                stack, token, "confirm_delete", ARGS, state=forged, responses=CONFIRM
            )
            assert_row(status, headers, body, "Invalid requestState")
        assert len(retries(stack.upstream)) == 1

    @pytest.mark.row("invalid_request_state")
    async def test_wrong_key_id_and_a_key_the_gateway_does_not_have(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES, sub="erin")
        for state in (
            forge(stack, genuine_claims(stack), key_id="zz", key=KEY_B),  # unknown key id
            forge(stack, genuine_claims(stack), key_id="a", key=KEY_B),  # right id, wrong key
        ):
            status, headers, body = await call(
                stack, token, "confirm_delete", ARGS, state=state, responses=CONFIRM
            )
            assert_row(status, headers, body, "Invalid requestState")
        assert retries(stack.upstream) == []

    @pytest.mark.row("invalid_request_state")
    async def test_state_bound_to_another_backend(self, stack: LiveStack) -> None:
        state = forge(stack, genuine_claims(stack, backend="tickets"))
        status, headers, body = await call(
            stack,
            stack.token(SCOPES, sub="erin"),
            "confirm_delete",
            ARGS,
            state=state,
            responses=CONFIRM,
        )
        assert_row(status, headers, body, "requestState does not match this request")
        assert retries(stack.upstream) == []
        assert audit_events(stack)[-1]["input"] == {"refused": "mismatch"}

    @pytest.mark.row("invalid_request_state")
    async def test_state_without_input_responses(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES)
        sealed = await first_round(stack, token)
        for responses in (None, {"responses": None}):  # absent, and explicitly null
            status, headers, body = await call(
                stack,
                token,
                "confirm_delete",
                ARGS,
                state=sealed,
                extra={"inputResponses": None} if responses else None,
            )
            assert_row(status, headers, body, "inputResponses are required with this requestState")
        assert len(retries(stack.upstream)) == 1

    @pytest.mark.row("invalid_request_state")
    async def test_input_responses_without_state(self, stack: LiveStack) -> None:
        status, headers, body = await call(
            stack, stack.token(SCOPES), "confirm_delete", ARGS, responses=CONFIRM
        )
        assert_row(status, headers, body, "inputResponses need the requestState they answer")
        assert retries(stack.upstream) == []

    @pytest.mark.row("invalid_request_state")
    async def test_oversized_input_responses_at_and_past_the_limit(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES)
        sealed = await first_round(stack, token)

        def padded(size: int) -> dict[str, Any]:
            answers: dict[str, Any] = {**CONFIRM, "pad": ""}
            base = len(json.dumps(answers, separators=(",", ":")).encode())
            answers["pad"] = "x" * (size - base)
            assert len(json.dumps(answers, separators=(",", ":")).encode()) == size
            return answers

        status, headers, body = await call(
            stack, token, "confirm_delete", ARGS, state=sealed, responses=padded(1025)
        )
        assert_row(status, headers, body, "inputResponses too large")
        assert len(retries(stack.upstream)) == 1
        status, _, done = await call(
            stack, token, "confirm_delete", ARGS, state=sealed, responses=padded(1024)
        )
        assert status == 200, done
        assert retries(stack.upstream)[-1]["inputResponses"] == CONFIRM  # "pad" not asked for

    @pytest.mark.row("invalid_request_state")
    async def test_an_answer_of_the_wrong_shape(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES)
        sealed = await first_round(stack, token)
        for answer in (12345, {"action": "maybe"}, {"roots": []}):
            status, headers, body = await call(
                stack, token, "confirm_delete", ARGS, state=sealed, responses={"confirm": answer}
            )
            assert_row(status, headers, body, "Invalid inputResponses")
        assert len(retries(stack.upstream)) == 1

    @pytest.mark.row("invalid_params")
    async def test_retry_members_of_the_wrong_type_are_invalid_params(
        self, stack: LiveStack
    ) -> None:
        token = stack.token(SCOPES)
        for extra in ({"requestState": 7}, {"inputResponses": [1]}, {"inputResponses": "x"}):
            status, headers, body = await call(stack, token, "confirm_delete", ARGS, extra=extra)
            assert_row(status, headers, body, "Invalid params")
        assert retries(stack.upstream) == []

    async def test_refusals_are_audited_with_their_reason_only(self, stack: LiveStack) -> None:
        await call(stack, stack.token(SCOPES), "confirm_delete", ARGS, responses=CONFIRM)
        (event,) = [e for e in audit_events(stack) if e["event"] == "tool_call"]
        assert (event["error_row"], event["outcome"]) == ("invalid_request_state", "rejected")
        assert event["input"] == {"refused": "state_missing"}


@pytest.mark.row("tool_error_result")
async def test_a_legacy_client_gets_the_fixed_tool_error_and_nothing_is_relayed(
    make_stack: MakeStack,
) -> None:
    upstream = InputUpstream()
    async with make_stack.of(input_stack, upstream=upstream) as stack:
        status, _, text = await stack.legacy_call(stack.token(SCOPES), "confirm_delete", ARGS)
        body = json.loads(text)
        events = audit_events(stack)
    assert status == 200, text
    validate_response("2025-06-18", body, "tools/call")
    assert body["result"] == {
        "content": [{"type": "text", "text": LEGACY_CLIENT_TEXT}],
        "isError": True,
    }
    assert "requestState" not in text and "inputRequests" not in text
    assert len(retries(upstream)) == 1
    assert events[-1]["outcome"] == "input_refused"


@pytest.mark.row("missing_client_capability")
async def test_a_kind_the_client_did_not_declare_is_32021(make_stack: MakeStack) -> None:
    upstream = InputUpstream()
    async with make_stack.of(input_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        status, headers, body = await call(
            stack, token, "confirm_delete", ARGS, capabilities={"sampling": {}}
        )
        assert status == 400, body
        assert headers["Cache-Control"] == "no-store"
        validate_response("2026-07-28", body)
        assert body["error"] == {
            "code": -32021,
            "message": "Missing required client capability: elicitation",
            "data": {"requiredCapabilities": {"elicitation": {"form": {}}}},
        }
        upstream.raw_round = {
            "resultType": "input_required",
            "inputRequests": {
                "login": {
                    "method": "elicitation/create",
                    "params": {"mode": "url", "message": "Sign in", "url": "https://x.test/c"},
                },
                "roots": {"method": "roots/list"},
            },
        }
        status, _, body = await call(stack, token, "raw", {}, capabilities={"elicitation": {}})
    assert status == 400
    assert body["error"]["data"] == {
        "requiredCapabilities": {"elicitation": {"url": {}}, "roots": {}}
    }
    # What the client declared went upstream as the client's own declaration.
    meta = retries(upstream)[0]["_meta"]
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"sampling": {}}


@pytest.mark.row("tool_error_result")
async def test_past_max_rounds_the_round_is_a_tool_error(make_stack: MakeStack) -> None:
    async with make_stack.of(input_stack, settings={"max_rounds": 2}) as stack:
        token = stack.token(SCOPES)
        state, answers = None, None
        results = []
        for rid in range(1, 4):
            status, _, body = await call(
                stack, token, "endless", {}, state=state, responses=answers, rid=rid
            )
            assert status == 200
            results.append(body["result"])
            state = body["result"].get("requestState")
            answers = {"again": {"action": "accept", "content": {"ok": True}}}
    assert [r.get("resultType") for r in results] == [
        "input_required",
        "input_required",
        "complete",
    ]
    assert results[2]["isError"] is True
    assert results[2]["content"] == [{"type": "text", "text": TOO_MANY_ROUNDS_TEXT}]


@pytest.mark.parametrize(
    "bad_round",
    [
        {"resultType": "input_required", "inputRequests": {"x": {"method": "tools/call"}}},
        {"resultType": "input_required"},
        {"resultType": "input_required", "requestState": "s" * 9000},
        {"resultType": "input_required", "inputRequests": {"x": form("m", a={"type": "object"})}},
    ],
    ids=["unknown-kind", "empty", "state-too-large", "schema"],
)
@pytest.mark.row("tool_error_result")
async def test_an_upstream_round_of_the_wrong_shape_is_the_fixed_failure(
    make_stack: MakeStack,
    bad_round: dict[str, Any],
) -> None:
    upstream = InputUpstream(raw_round=bad_round)
    async with make_stack.of(input_stack, upstream=upstream) as stack:
        status, _, body = await call(stack, stack.token(SCOPES), "raw", {})
    assert status == 200
    assert body["result"]["content"] == [{"type": "text", "text": FAILED_TEXT}]
    assert body["result"]["isError"] is True


@pytest.mark.row("tool_error_result")
async def test_without_input_requests_configured_rounds_are_refused_and_states_invalid(
    make_stack: MakeStack,
) -> None:
    upstream = InputUpstream()
    async with make_stack.of(input_stack, upstream=upstream, enabled=False) as stack:
        token = stack.token(SCOPES)
        status, _, body = await call(stack, token, "confirm_delete", ARGS)
        assert status == 200
        assert body["result"]["content"] == [{"type": "text", "text": DISABLED_TEXT}]
        status, headers, body = await call(
            stack, token, "confirm_delete", ARGS, state="AQJrMQ", responses=CONFIRM
        )
        assert_row(status, headers, body, "Invalid requestState")
    assert len(retries(upstream)) == 1


class TestPolicyBetweenRounds:
    async def test_a_retry_is_judged_by_the_policy_in_force_now(
        self, tmp_path: Path, make_stack: MakeStack
    ) -> None:
        upstream = InputUpstream()
        async with make_stack.of(input_stack, upstream=upstream) as stack:
            token = stack.token(SCOPES)
            sealed = await first_round(stack, token)
            reloader = cast(Any, stack.server.services.policy)
            stricter = POLICY.replace(
                "confirm_delete: {scopes: [tools:input]}", "confirm_delete: {scopes: [tools:admin]}"
            )
            (tmp_path / "policy.yaml").write_text(stricter)
            assert reloader.reload() is True
            status, headers, body = await call(
                stack, token, "confirm_delete", ARGS, state=sealed, responses=CONFIRM, rid=2
            )
        assert status == 403, body
        assert body["error"]["code"] == -31403
        assert "tools:admin" in headers["WWW-Authenticate"]
        assert len(retries(upstream)) == 1  # the new policy refused it: nothing went upstream

    async def test_a_policy_change_that_still_allows_is_recorded_not_refused(
        self, tmp_path: Path, make_stack: MakeStack
    ) -> None:
        async with make_stack.of(input_stack) as stack:
            token = stack.token(SCOPES)
            sealed = await first_round(stack, token)
            (tmp_path / "policy.yaml").write_text(POLICY + "  other_tool: {scopes: [x]}\n")
            assert cast(Any, stack.server.services.policy).reload() is True
            status, _, done = await call(
                stack, token, "confirm_delete", ARGS, state=sealed, responses=CONFIRM, rid=2
            )
            events = audit_events(stack)
        assert status == 200 and done["result"]["content"][0]["text"] == "Deleted /tmp/x"
        assert events[-1]["input"]["policy_changed"] is True


async def test_retry_members_from_a_legacy_client_are_ignored_never_forwarded(
    make_stack: MakeStack,
) -> None:
    upstream = InputUpstream()
    async with make_stack.of(input_stack, upstream=upstream) as stack:
        body = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "echo",
                "arguments": {"text": "hi"},
                "requestState": "anything",
                "inputResponses": CONFIRM,
            },
        }
        status, _, text = await stack.post(
            stack.token(SCOPES), body, {"MCP-Protocol-Version": "2025-06-18"}
        )
    assert status == 200, text
    assert json.loads(text)["result"]["isError"] is False
    (sent,) = retries(upstream)
    assert "requestState" not in sent and "inputResponses" not in sent
