"""Task status notifications through the gateway, 2026-07-28 over HTTP, in front of a real
task-capable upstream (:class:`~tests.support.task_upstream.TaskUpstream`).

SEP-2663 §Task Status Notifications: a client that declared the extension names task ids in
``notifications.taskIds`` of a ``subscriptions/listen``; the acknowledgment lists those agreed
to; each ``notifications/tasks`` carries the whole task, as ``tasks/get`` would; progress and log
notifications MUST NOT be sent for a task. Through the gateway the task id is the creator's
sealed handle: a handle is honoured only for its creator, checked as a task request's is, and
every notification carries the creator's own handle, never the backend's id.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import aiohttp
import pytest
import structlog

from gateway.errors import RATE_LIMITED_CODE
from gateway.protocol.task_handle import handle_digest
from tests.support.input_stack import SERVICE_CREDENTIAL
from tests.support.live_stack import LiveStack, MakeStack, ServerFactory, audit_events
from tests.support.sse_reading import complete, next_message, rest_of
from tests.support.task_stack import POLICY, SCOPES, call, forge, listen, task, task_stack
from tests.support.task_upstream import TASKS, TaskUpstream

ADMIN = "notify-admin-token-0123456789abcdef01234"
ACK = "notifications/subscriptions/acknowledged"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


@pytest.fixture
async def stack(make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LiveStack]:
    monkeypatch.setenv("NOTIFY_ADMIN_TOKEN", ADMIN)
    async with make_stack.of(
        task_stack,
        upstream=TaskUpstream(chatty=True),
        gateway={
            "admin": {"token": {"env": "NOTIFY_ADMIN_TOKEN"}},
            "limits": {"max_subscribed_uris_per_principal": 3},
        },
    ) as live:
        yield live


def upstream_of(stack: LiveStack) -> TaskUpstream:
    return cast(TaskUpstream, stack.upstream)


async def created(stack: LiveStack, token: str, tool: str = "slow_compute") -> str:
    slow = tool.endswith("slow_compute")
    arguments = {"seconds": 60, "label": "x"} if slow else {"filename": "f"}
    status, _, body = await call(stack, token, tool, arguments)
    assert status == 200 and body["result"]["resultType"] == "task", body
    return cast(str, body["result"]["taskId"])


async def acknowledged(response: aiohttp.ClientResponse) -> dict[str, Any]:
    assert response.status == 200, await response.text()
    ack = await next_message(response)
    assert ack["method"] == ACK
    return cast(dict[str, Any], ack["params"])


def upstream_listens(stack: LiveStack) -> list[dict[str, Any]]:
    """The params of every ``subscriptions/listen`` the gateway sent the upstream."""
    return [r.json["params"] for r in upstream_of(stack).calls("subscriptions/listen")]


async def test_the_creator_hears_its_task_under_its_own_handle(stack: LiveStack) -> None:
    token = stack.token(SCOPES)
    handle = await created(stack, token, "confirm_delete")
    upstream = upstream_of(stack)
    async with listen(stack, token, [handle], rid=11) as response:
        ack = await acknowledged(response)
        assert ack == {"_meta": {SUBSCRIPTION_ID: 11}, "notifications": {"taskIds": [handle]}}
        # The backend was asked for its own id, with the extension declared (MUST).
        (asked,) = upstream_listens(stack)
        assert asked["notifications"] == {"taskIds": ["task-1"]}
        assert asked["_meta"]["io.modelcontextprotocol/clientCapabilities"] == {
            "extensions": {TASKS: {}}
        }
        upstream.push("task-1")
        first = await next_message(response)
        assert first["method"] == "notifications/tasks"
        assert first["params"]["status"] == "input_required"
        assert first["params"]["inputRequests"]["confirm"]["method"] == "elicitation/create"
        answer = {"confirm": {"action": "accept", "content": {"confirm": True}}}
        assert (await task(stack, token, "tasks/update", handle, responses=answer))[0] == 200
        seen = [await next_message(response)]
        while seen[-1]["params"]["status"] != "completed":
            seen.append(await next_message(response))
    for note in [first, *seen]:
        assert note["method"] == "notifications/tasks"  # no progress, no log message (MUST NOT)
        assert note["params"]["taskId"] == handle
        assert note["params"]["_meta"] == {SUBSCRIPTION_ID: 11}
        assert "resultType" not in note["params"]
        assert "task-1" not in json.dumps(note)
    done = seen[-1]["params"]
    assert done["result"]["content"] == [{"type": "text", "text": "Deleted f"}]
    # §Task Status Notifications: the complete task, identical to what tasks/get answers.
    status, _, raw = await task(stack, token, "tasks/get", handle)
    polled = json.loads(raw)["result"]
    assert status == 200
    del polled["resultType"], polled["_meta"], done["_meta"]
    assert done == polled


async def test_only_the_named_tasks_are_relayed_and_no_progress_or_log(
    make_stack: MakeStack,
) -> None:
    """An upstream that sends every task's statuses to every listener, with progress and log
    notifications about them: the caller hears only the task it named, nothing else."""
    upstream = TaskUpstream(chatty=True, broadcast=True)
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        named = await created(stack, token)
        await created(stack, token)  # task-2: its own, but not named
        await created(stack, stack.token(SCOPES, sub="mallory"))  # task-3: another user's
        async with listen(stack, token, [named]) as response:
            assert (await acknowledged(response))["notifications"] == {"taskIds": [named]}
            for task_id in ("task-2", "task-3", "task-1"):
                upstream.push(task_id)
            note = await next_message(response)
            assert note["method"] == "notifications/tasks"
            assert note["params"]["taskId"] == named
            upstream.push("task-1")
            assert (await next_message(response))["params"]["taskId"] == named


async def test_with_several_backends_each_id_maps_back_to_its_own_backends_handle(
    aiohttp_server: ServerFactory, make_stack: MakeStack
) -> None:
    """Two backends that both call their task ``task-1``: each is asked for its own, and each
    notification goes out under the handle of the task of the backend that sent it."""
    ups = {"a": TaskUpstream(), "b": TaskUpstream()}
    backends = {}
    for name, upstream in ups.items():
        url = str((await aiohttp_server(upstream.app())).make_url("/mcp"))
        backends[name] = {"url": url, "allow_insecure_http": True, "credential": SERVICE_CREDENTIAL}
    policy = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n" + "".join(
        f"  {name}__slow_compute: {{scopes: [tools:run], tasks: true}}\n" for name in ups
    )
    async with make_stack.of(task_stack, backends=backends, policy=policy) as stack:
        token = stack.token(SCOPES)
        handles = {name: await created(stack, token, f"{name}__slow_compute") for name in ups}
        async with listen(stack, token, [handles["a"], handles["b"]]) as response:
            ack = await acknowledged(response)
            assert ack["notifications"] == {"taskIds": [handles["a"], handles["b"]]}
            for name in ("b", "a"):
                ups[name].push("task-1")
                assert (await next_message(response))["params"]["taskId"] == handles[name]
        for upstream in ups.values():
            (asked,) = [r.json["params"] for r in upstream.calls("subscriptions/listen")]
            assert asked["notifications"] == {"taskIds": ["task-1"]}
            await upstream.close()


class TestNotAcknowledged:
    """A handle the caller may not hear about is left out of the acknowledgment exactly as a
    made-up one is, and nothing about it is asked upstream."""

    @staticmethod
    async def ack_for(stack: LiveStack, token: str, handles: list[str]) -> dict[str, Any]:
        async with listen(stack, token, handles) as response:
            return await acknowledged(response)

    async def assert_unknown(self, stack: LiveStack, token: str, handle: str) -> None:
        got = await self.ack_for(stack, token, [handle])
        assert got == await self.ack_for(stack, token, ["t1.AQFhTm9ub25zZW5zZQ"])
        assert got["notifications"] == {}
        assert upstream_listens(stack) == []  # no backend was asked anything

    async def test_another_users_handle(self, stack: LiveStack) -> None:
        handle = await created(stack, stack.token(SCOPES, sub="erin"))
        await self.assert_unknown(stack, stack.token(SCOPES, sub="mallory"), handle)

    async def test_the_same_users_other_client(self, stack: LiveStack) -> None:
        handle = await created(stack, stack.token(SCOPES, sub="erin"))
        await self.assert_unknown(stack, stack.token(SCOPES, client_id="other-cli"), handle)

    async def test_tampered_and_expired_handles(self, stack: LiveStack) -> None:
        token = stack.token(SCOPES)
        handle = await created(stack, token)
        middle = len(handle) // 2
        flipped = handle[:middle] + ("A" if handle[middle] != "A" else "B") + handle[middle + 1 :]
        now = int(time.time())
        for bad in (
            flipped,
            handle[:-4],
            "task-1",
            "",
            forge(stack, issued_at=now - 700, expires_at=now - 1),
            forge(stack, backend="gone"),
        ):
            await self.assert_unknown(stack, token, bad)

    async def test_a_tool_the_token_may_no_longer_call(self, stack: LiveStack) -> None:
        handle = await created(stack, stack.token(SCOPES))
        await self.assert_unknown(stack, stack.token("mcp:access"), handle)

    async def test_the_refusals_are_logged_by_digest_only(self, stack: LiveStack) -> None:
        handle = await created(stack, stack.token(SCOPES))
        with structlog.testing.capture_logs() as events:
            await self.ack_for(stack, stack.token(SCOPES, sub="mallory"), [handle])
        refused = [e for e in events if e["event"] == "task_listen_refused"]
        assert refused == [
            {
                "event": "task_listen_refused",
                "log_level": "info",
                "reason": "subject",
                "handle": handle_digest(handle),
            }
        ]
        assert handle not in json.dumps(events, default=str)


async def test_the_creators_handle_among_others_is_acknowledged_alone(stack: LiveStack) -> None:
    token = stack.token(SCOPES)
    mine = await created(stack, token)
    theirs = await created(stack, stack.token(SCOPES, sub="mallory"))
    async with listen(stack, token, [theirs, "t1.nonsense", mine]) as response:
        assert (await acknowledged(response))["notifications"] == {"taskIds": [mine]}
    assert [p["notifications"] for p in upstream_listens(stack)] == [{"taskIds": ["task-1"]}]


@pytest.mark.row("missing_client_capability")
async def test_without_the_extension_a_listen_for_tasks_is_refused(stack: LiveStack) -> None:
    """§Task Status Notifications: MUST return -32021 naming the extension."""
    token = stack.token(SCOPES)
    handle = await created(stack, token)
    async with listen(stack, token, [handle], capabilities={}) as response:
        assert response.status == 400
        assert (await response.json())["error"] == {
            "code": -32021,
            "message": "Missing required client capability: extensions",
            "data": {"requiredCapabilities": {"extensions": {TASKS: {}}}},
        }
    assert upstream_listens(stack) == []


@pytest.mark.row("method_not_found")
async def test_a_legacy_client_cannot_listen_for_tasks(stack: LiveStack) -> None:
    token = stack.token(SCOPES)
    handle = await created(stack, token)
    await stack.legacy_initialize(token)
    status, _, text = await stack.legacy(
        token, "subscriptions/listen", {"notifications": {"taskIds": [handle]}}
    )
    assert status == 200 and json.loads(text)["error"]["code"] == -32601
    assert upstream_listens(stack) == []


@pytest.mark.row("invalid_params")
async def test_task_ids_must_be_an_array_of_strings(stack: LiveStack) -> None:
    token = stack.token(SCOPES)
    for bad in ("t1.x", [1], {"a": "t1.x"}):
        async with listen(stack, token, bad) as response:
            assert response.status == 400
            assert (await response.json())["error"]["code"] == -32602


@pytest.mark.row("too_many_subscriptions")
async def test_task_ids_count_against_the_principals_bound_at_and_past_it(
    stack: LiveStack,
) -> None:
    """``limits.max_subscribed_uris_per_principal`` (3 here) bounds URIs and task ids together."""
    token = stack.token(SCOPES)
    handles = [await created(stack, token) for _ in range(4)]
    async with listen(stack, token, handles) as response:
        assert response.status == 429
        assert (await response.json())["error"] == {
            "code": RATE_LIMITED_CODE,
            "message": "Too many subscriptions",
        }
    async with listen(stack, token, handles[:3]) as response:
        assert (await acknowledged(response))["notifications"] == {"taskIds": handles[:3]}
        async with listen(stack, token, handles[3:]) as more:
            assert more.status == 429  # the first stream holds all three
    assert len(upstream_listens(stack)) == 1


async def test_a_revoked_tokens_stream_ends(stack: LiveStack) -> None:
    token = stack.token(SCOPES)
    handle = await created(stack, token)
    async with listen(stack, token, [handle], rid=9) as response:
        await acknowledged(response)
        assert (await stack.revoke(token, ADMIN))[0] == 200
        rest = await rest_of(response, 2.0)
    assert complete(rest) and all(m.get("method") != "notifications/tasks" for m in rest)
    async with listen(stack, token, [handle]) as response:
        assert response.status == 401


async def test_a_reload_that_stops_the_tool_running_as_a_task_ends_the_stream(
    stack: LiveStack,
) -> None:
    """The policy in force decides each notification (none after the reload, even before the
    stream has seen it) and a reload that takes a task away ends the stream gracefully."""
    token = stack.token(SCOPES)
    handle = await created(stack, token)
    async with listen(stack, token, [handle]) as response:
        await acknowledged(response)
        policy = POLICY.replace(
            "slow_compute: {scopes: [tools:run], tasks: true}",
            "slow_compute: {scopes: [tools:run]}",
        )
        (stack.config_path.parent / "policy.yaml").write_text(policy)
        reload = stack.server.services.reload_policy
        assert reload is not None
        await asyncio.to_thread(reload)  # what SIGHUP does
        upstream_of(stack).push("task-1")
        rest = await rest_of(response, 2.0)
    assert complete(rest) and all(m.get("method") != "notifications/tasks" for m in rest)


async def test_no_upstream_id_or_token_in_any_answer_log_or_audit_event(
    make_stack: MakeStack,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Architecture invariant 4 on the listen path; and the backend's ids (``task-N``) reach
    no client, log line or audit event (only the upstream, which minted them)."""
    upstream = TaskUpstream(chatty=True, broadcast=True)
    async with make_stack.of(task_stack, upstream=upstream) as stack:
        token, other = stack.token(SCOPES), stack.token(SCOPES, sub="mallory")
        handle = await created(stack, token, "confirm_delete")
        mallorys = await created(stack, other)
        seen: list[str] = []
        async with listen(stack, token, [handle, mallorys]) as response:
            seen.append(json.dumps(await acknowledged(response)))
            for task_id in ("task-2", "task-1"):
                upstream.push(task_id)
            seen.append(json.dumps(await next_message(response)))
        async with listen(stack, other, [handle]) as response:
            seen.append(json.dumps(await acknowledged(response)))
        async with listen(stack, token, [handle], capabilities={}) as response:
            seen.append(await response.text())
    seen.append(json.dumps(audit_events(stack)))
    printed = capfd.readouterr()
    seen += [printed.out, printed.err]
    for secret in (token, other):
        assert not any(secret in text or secret[8:40] in text for text in seen)
    for upstream_id in ("task-1", "task-2"):
        assert not any(upstream_id in text for text in seen), upstream_id
    assert handle in seen[1]  # the notification came, under the caller's handle
    assert {r.headers["Authorization"] for r in upstream.requests} == {"Bearer service-secret"}
