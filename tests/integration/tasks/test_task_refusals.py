"""Every refusal of a task handle is the unknown-task answer, byte for byte, and nothing upstream.

SEP-2663 §Security Considerations: every task request MUST be authenticated and authorised, task
ids MUST be unguessable. The gateway's handle binds the backend's id to its creator (issuer,
subject, client id), the tool and an expiry; on every request the policy is asked again with the
current token. Each case below is compared with the answer to a made-up handle: same status,
same body bytes, same headers (but the request's own id), and the upstream saw nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, cast

import pytest

from tests.support.authzen_pdp import AuthZenPdp, authzen_pdp
from tests.support.input_stack import KEY_A, KEY_B
from tests.support.live_stack import LiveStack, MakeStack, ServerFactory, audit_events, modern_meta
from tests.support.schemas import validate_response
from tests.support.task_stack import CAPS, POLICY, SCOPES, call, forge, task, task_stack
from tests.support.task_upstream import TASKS, TaskUpstream
from tests.support.upstreams import ModernUpstream

ADMIN = "tasks-admin-token-0123456789abcdef012345"
UNKNOWN = b'{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Task not found"}}'
_VARYING = {"x-request-id", "date"}


def answer(status: int, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
    """The answer without what differs per request (its id, the date)."""
    kept = {k.lower(): v for k, v in headers.items() if k.lower() not in _VARYING}
    return status, kept, body


async def unknown(stack: LiveStack, token: str, method: str = "tasks/get") -> Any:
    """The answer to a handle nobody minted: the reference every refusal must equal."""
    return answer(*(await task(stack, token, method, "t1.AQFhTm9ub25zZW5zZQ")))


async def created(stack: LiveStack, token: str, seconds: float = 60) -> str:
    status, _, body = await call(stack, token, "slow_compute", {"seconds": seconds, "label": "x"})
    assert status == 200 and body["result"]["resultType"] == "task", body
    return cast(str, body["result"]["taskId"])


@pytest.fixture
async def stack(make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TASKS_ADMIN_TOKEN", ADMIN)
    async with make_stack.of(
        task_stack,
        gateway={"admin": {"token": {"env": "TASKS_ADMIN_TOKEN"}}},
    ) as live:
        yield live


@pytest.mark.row("unknown_task")
async def test_the_unknown_task_answer(stack: LiveStack) -> None:
    status, headers, body = await task(stack, stack.token(SCOPES), "tasks/get", "t1.AAAA")
    assert status == 400 and body == UNKNOWN
    assert headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "no-store"
    validate_response("2026-07-28", json.loads(body))


class TestIndistinguishable:
    @pytest.mark.row("unknown_task")
    async def test_another_users_handle(self, stack: LiveStack) -> None:
        handle = await created(stack, stack.token(SCOPES, sub="erin"))
        mallory = stack.token(SCOPES, sub="mallory")
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            got = answer(*(await task(stack, mallory, method, handle)))
            assert got == await unknown(stack, mallory, method)
        assert stack.upstream.task_calls() == []

    @pytest.mark.row("unknown_task")
    async def test_the_same_users_other_client(self, stack: LiveStack) -> None:
        handle = await created(stack, stack.token(SCOPES, sub="erin"))
        other = stack.token(SCOPES, sub="erin", client_id="other-cli")
        assert answer(*(await task(stack, other, "tasks/get", handle))) == await unknown(
            stack, other
        )
        assert stack.upstream.task_calls() == []

    @pytest.mark.row("unknown_task")
    async def test_tampered_handles(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES)
        handle = await created(stack, token)
        middle = len(handle) // 2
        flipped = handle[:middle] + ("A" if handle[middle] != "A" else "B") + handle[middle + 1 :]
        for forged in (
            flipped,
            handle[:-4],
            handle + "A",
            "t2" + handle[2:],
            handle[3:],
            forge(stack, key=("zz", KEY_B)),
            forge(stack, key=("a", KEY_B)),
            "task-1",  # the backend's own (guessable) id
            "t1." + "A" * 4000,  # longer than any handle
        ):
            got = answer(*(await task(stack, token, "tasks/get", forged)))
            assert got == await unknown(stack, token), forged
        assert stack.upstream.task_calls() == []

    @pytest.mark.row("unknown_task")
    async def test_an_expired_handle(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES, sub="erin")
        await created(stack, token)
        now = int(time.time())
        expired = forge(stack, issued_at=now - 700, expires_at=now - 1)
        assert answer(*(await task(stack, token, "tasks/get", expired))) == await unknown(
            stack, token
        )
        assert stack.upstream.task_calls() == []
        # The same claims unexpired open: the forged handle is genuine but for its expiry.
        status, _, body = await task(stack, token, "tasks/get", forge(stack))
        assert status == 200 and json.loads(body)["result"]["status"] == "working"

    @pytest.mark.row("unknown_task")
    async def test_another_issuers_subject_and_a_backend_no_longer_configured(
        self, stack: LiveStack
    ) -> None:
        token = stack.token(SCOPES, sub="erin")
        await created(stack, token)
        for forged in (
            forge(stack, issuer="https://other.example.test"),
            forge(stack, backend="gone"),
        ):
            got = answer(*(await task(stack, token, "tasks/get", forged)))
            assert got == await unknown(stack, token)
        assert stack.upstream.task_calls() == []

    @pytest.mark.row("unknown_task")
    async def test_a_tool_the_policy_no_longer_allows(
        self, stack: LiveStack, tmp_path: Path
    ) -> None:
        token = stack.token(SCOPES)
        handle = await created(stack, token)
        reloader = cast(Any, stack.server.services.policy)
        rule = "slow_compute: {scopes: [tools:run], tasks: true}"
        for changed in (
            rule.replace("tools:run", "tools:admin"),  # the scope is gone: step-up, not 403
            rule.replace(", tasks: true", ""),  # no more tasks for the tool
            "slow_compute: {deny: true}",
            rule.replace("tasks: true", "tasks: true, when: 'claims.sub == \"nobody\"'"),
            "other_tool: {scopes: []}",  # no rule at all: hidden
        ):
            (tmp_path / "policy.yaml").write_text(POLICY.replace(rule, changed))
            assert reloader.reload() is True
            got = answer(*(await task(stack, token, "tasks/get", handle)))
            assert got == await unknown(stack, token), changed
        assert stack.upstream.task_calls() == []
        (tmp_path / "policy.yaml").write_text(POLICY)
        assert reloader.reload() is True
        assert (await task(stack, token, "tasks/get", handle))[0] == 200
        assert len(stack.upstream.task_calls()) == 1

    @pytest.mark.row("unknown_task")
    async def test_a_task_the_backend_does_not_know(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES, sub="erin")
        handle = forge(stack, upstream_id="task-99")  # genuine, but the backend has no such task
        got = answer(*(await task(stack, token, "tasks/get", handle)))
        assert got == await unknown(stack, token)
        assert [p["taskId"] for p in stack.upstream.task_calls()] == ["task-99"]

    async def test_refusals_are_audited_with_their_reason_only(self, stack: LiveStack) -> None:
        handle = await created(stack, stack.token(SCOPES, sub="erin"))
        await task(stack, stack.token(SCOPES, sub="mallory"), "tasks/get", handle)
        await task(stack, stack.token(SCOPES), "tasks/cancel", "task-1")
        events = [e for e in audit_events(stack) if e["event"].startswith("task_")]
        assert [(e["event"], e["task"]["refused"]) for e in events] == [
            ("task_get", "subject"),
            ("task_cancel", "malformed"),
        ]
        assert events[0]["tool"] is None and events[0]["error_row"] == "unknown_task"
        text = json.dumps(audit_events(stack))
        assert handle not in text and "task-1" not in text


class TestBeforeTheHandle:
    @pytest.mark.row("header_mismatch")
    async def test_mcp_name_must_be_the_task_id(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES)
        handle = await created(stack, token)
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            for name in ("task-1", handle + "x", ""):
                status, _, body = await task(stack, token, method, handle, name=name)
                assert status == 400
                assert json.loads(body)["error"] == {"code": -32020, "message": "Header mismatch"}
        assert stack.upstream.task_calls() == []

    @pytest.mark.row("missing_client_capability")
    async def test_a_task_request_without_the_extension_is_32021(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES)
        handle = await created(stack, token)
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            caps = {"elicitation": {}}
            status, headers, body = await task(stack, token, method, handle, capabilities=caps)
            assert status == 400 and headers["Content-Type"] == "application/json"
            error = json.loads(body)["error"]
            assert error["code"] == -32021
            assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS: {}}}}
        assert stack.upstream.task_calls() == []

    @pytest.mark.row("rate_limited")
    async def test_polling_past_the_budget_is_429_per_handle(
        self, tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # 10 s interval: twice that rate over a minute is 12 requests per handle.
        async with task_stack(
            tmp_path / "b", aiohttp_server, monkeypatch, tasks={"min_poll_interval_ms": 10_000}
        ) as live:
            token = live.token(SCOPES)
            handle = await created(live, token)
            _, _, body = await call(live, token, "slow_compute", {"seconds": 60})
            other = body["result"]["taskId"]
            for _ in range(12):
                status, _, raw = await task(live, token, "tasks/get", handle)
                assert status == 200, raw
                assert json.loads(raw)["result"]["pollIntervalMs"] == 10_000
            status, headers, raw = await task(live, token, "tasks/get", handle)
            assert status == 429 and int(headers["Retry-After"]) >= 1
            assert json.loads(raw)["error"]["code"] == -31429
            assert (await task(live, token, "tasks/get", other))[0] == 200
            assert len(live.upstream.task_calls()) == 13

    @pytest.mark.row("invalid_request_state")
    async def test_update_answers_at_and_past_the_size_bound(
        self, tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        async with task_stack(
            tmp_path / "b",
            aiohttp_server,
            monkeypatch,
            inputs={"max_input_response_bytes": 1024},
        ) as live:
            token = live.token(SCOPES)
            handle = await created(live, token)

            def padded(size: int) -> dict[str, Any]:
                answer = {"k": {"action": "accept", "content": {"v": ""}}}
                base = len(json.dumps(answer, separators=(",", ":")))
                answer["k"]["content"]["v"] = "x" * (size - base)
                return answer

            status, _, _ = await task(live, token, "tasks/update", handle, responses=padded(1024))
            assert status == 200
            status, _, raw = await task(live, token, "tasks/update", handle, responses=padded(1025))
            assert status == 400
            assert json.loads(raw)["error"] == {
                "code": -32602,
                "message": "inputResponses too large",
            }
            assert len(live.upstream.task_calls("tasks/update")) == 1

    @pytest.mark.row("method_not_found")
    async def test_without_tasks_configured_the_methods_do_not_exist(
        self, tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        upstream = TaskUpstream()
        async with task_stack(
            tmp_path / "b",
            aiohttp_server,
            monkeypatch,
            upstream=upstream,
            tasks={"enabled": False},
        ) as live:
            token = live.token(SCOPES)
            status, _, raw = await task(live, token, "tasks/get", "t1.AAAA")
            assert status == 404 and json.loads(raw)["error"]["code"] == -32601
            for method in ("tasks/result", "tasks/list"):
                status, _, text = await live.modern(
                    token, method, {"taskId": "x"}, capabilities=CAPS
                )
                assert status == 404 and json.loads(text)["error"]["code"] == -32601
            status, _, body = await call(live, token, "slow_compute", {"seconds": 0})
            assert body["result"]["resultType"] == "complete"
            # The client's declaration of the extension never reached the backend.
            sent = upstream.calls("tools/call")[-1].json["params"]["_meta"]
            assert TASKS not in json.dumps(sent)
            status, _, text = await live.modern(token, "server/discover")
            assert "extensions" not in json.loads(text)["result"]["capabilities"]

    @pytest.mark.row("tool_error_result")
    async def test_a_tool_that_needs_a_task_the_policy_withholds_is_a_tool_error(
        self, tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        policy = POLICY.replace(
            "failing_job: {scopes: [tools:run], tasks: true}", "failing_job: {scopes: [tools:run]}"
        )
        async with task_stack(tmp_path / "b", aiohttp_server, monkeypatch, policy=policy) as live:
            status, _, body = await call(live, live.token(SCOPES), "failing_job")
            assert status == 200 and body["result"]["isError"] is True
            assert "only as a task" in body["result"]["content"][0]["text"]


async def test_a_revoked_tokens_polls_are_refused_at_once(stack: LiveStack) -> None:
    token = stack.token(SCOPES)
    handle = await created(stack, token)
    assert (await task(stack, token, "tasks/get", handle))[0] == 200
    assert (await stack.revoke(token, ADMIN))[0] == 200
    status, headers, _ = await task(stack, token, "tasks/get", handle)
    assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]
    assert len(stack.upstream.task_calls()) == 1


async def test_a_key_rotation_keeps_old_handles_valid_until_the_key_is_dropped(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = TaskUpstream()
    async with task_stack(tmp_path / "a", aiohttp_server, monkeypatch, upstream=upstream) as old:
        token = old.token(SCOPES)
        handle = await created(old, token, seconds=0.2)
        url, issuer = old.config.backends[0].url, old.issuer
        # Rolled out: b seals, a still opens. The old handle works, the new ones are b's.
        async with task_stack(
            tmp_path / "b",
            aiohttp_server,
            monkeypatch,
            backend_url=url,
            issuer=issuer,
            keys={"b": KEY_B, "a": KEY_A},
            seal_key_id="b",
        ) as rotated:
            status, _, raw = await task(rotated, token, "tasks/get", handle)
            assert status == 200 and json.loads(raw)["result"]["taskId"] == handle
            fresh = await created(rotated, token)
            assert (await task(old, token, "tasks/get", fresh))[2] == UNKNOWN  # a cannot open b's
        # a dropped: its handles are unknown, like any other.
        async with task_stack(
            tmp_path / "c",
            aiohttp_server,
            monkeypatch,
            backend_url=url,
            issuer=issuer,
            keys={"b": KEY_B},
        ) as dropped:
            assert (await task(dropped, token, "tasks/get", handle))[2] == UNKNOWN
            assert (await task(dropped, token, "tasks/get", fresh))[0] == 200


@pytest.mark.row("missing_client_capability")
async def test_a_listen_for_task_statuses_needs_the_extension_and_a_real_handle(
    make_stack: MakeStack,
) -> None:
    """SEP-2663 §Task Status Notifications: -32021 without the extension (MUST); with it, a
    handle nobody minted is not agreed to (tests/integration/tasks/test_task_notifications.py:
    the relay itself)."""
    upstream = ModernUpstream(list_changed=True)
    stack = make_stack.of(task_stack, upstream=upstream)  # type: ignore[arg-type]
    async with stack as live:
        token = live.token(SCOPES)
        wanted = {"toolsListChanged": True, "taskIds": ["t1.abc"]}
        status, _, text = await live.modern(
            token, "subscriptions/listen", {"notifications": wanted}, capabilities={}
        )
        assert status == 400 and json.loads(text)["error"]["code"] == -32021
        assert json.loads(text)["error"]["data"] == {
            "requiredCapabilities": {"extensions": {TASKS: {}}}
        }
        body = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "subscriptions/listen",
            "params": {"notifications": wanted, "_meta": modern_meta(CAPS)},
        }
        headers = {
            "Authorization": f"Bearer {token}",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "subscriptions/listen",
            "Accept": "application/json, text/event-stream",
        }
        async with live.session.post(live.server.mcp_url, json=body, headers=headers) as stream:
            assert stream.status == 200
            line = b""
            while not line.startswith(b"data:"):
                line = await stream.content.readline()
            ack = json.loads(line[5:])
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"].get("taskIds") is None


@pytest.mark.row("unknown_task")
async def test_the_decision_point_is_asked_again_and_its_deny_is_unknown(
    aiohttp_server: ServerFactory, make_stack: MakeStack
) -> None:
    """policy_external (AuthZEN): every task request asks the ``tools/call`` question for the
    task's tool with the current token; a deny is the unknown-task answer, a decision point that
    cannot answer is 503 (the caller's own task: nothing to hide)."""
    allowed = {"now": True}
    pdp = AuthZenPdp(rule=lambda request: allowed["now"])
    async with authzen_pdp(aiohttp_server, pdp) as pdp:
        external = {
            "url": pdp.url,
            "allow_insecure_http": True,
            "timeout_s": 0.5,
            "cache": {"ttl_s": 0},
        }
        async with make_stack.of(task_stack, gateway={"policy_external": external}) as live:
            token = live.token(SCOPES)
            handle = await created(live, token)
            assert (await task(live, token, "tasks/get", handle))[0] == 200
            asked = pdp.seen[-1].body
            assert asked["action"] == {"name": "tools/call"}
            assert asked["resource"]["id"] == "slow_compute"
            allowed["now"] = False
            got = answer(*(await task(live, token, "tasks/get", handle)))
            assert got[2] == UNKNOWN
            pdp.faults.status = 500
            status, headers, _ = await task(live, token, "tasks/get", handle)
            assert status == 503 and "Retry-After" in headers
            assert len(live.upstream.task_calls()) == 1


@pytest.mark.row("rate_limited")
async def test_creating_a_task_counts_against_the_tools_rate_limit(make_stack: MakeStack) -> None:
    policy = POLICY.replace(
        "slow_compute: {scopes: [tools:run], tasks: true}",
        "slow_compute: {scopes: [tools:run], tasks: true, rate_limit: 2/minute}",
    )
    async with make_stack.of(task_stack, policy=policy) as live:
        token = live.token(SCOPES)
        handles = [await created(live, token) for _ in range(2)]
        status, headers, body = await call(live, token, "slow_compute", {"seconds": 60})
        assert status == 429 and int(headers["Retry-After"]) >= 1
        assert body["error"]["code"] == -31429
        assert len(live.upstream.tasks) == 2
        # Polling is not creating: the tasks made are still served.
        assert (await task(live, token, "tasks/get", handles[0]))[0] == 200
