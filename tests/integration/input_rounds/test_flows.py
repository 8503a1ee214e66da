"""2026-07-28 input rounds through the real gateway: elicitation, sampling, roots, two rounds.

MCP basic/patterns/mrtr.mdx. A real upstream asks for input (tests/support/input_upstream.py),
the production gateway seals its state, and a modern client completes each flow: the official
``mcp`` SDK's client (it drives the retry loop with its callbacks), and a raw client that follows
the spec text so the wire can be checked byte by byte: the client never sees the upstream's own
state, the upstream never sees the envelope, and each round is sealed afresh.
"""

from __future__ import annotations

import base64
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import structlog
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.support.input_stack import (
    SCOPES,
    SERVICE_CREDENTIAL,
    call,
    input_stack,
)
from tests.support.input_upstream import INPUT_TOOLS, InputUpstream, retries
from tests.support.live_stack import LiveStack, MakeStack, ServerFactory, audit_events
from tests.support.schemas import validate_response, validate_result

ANSWER = "TOP-SECRET-ANSWER-4242"


class Callbacks:
    """The SDK client's callbacks: what the user (and the client's LLM) would answer."""

    def __init__(self, dates: str = "2026-08-01") -> None:
        self.dates = dates
        self.asked: list[str] = []

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        message = getattr(params, "message", "")
        self.asked.append(f"elicitation: {message}")
        if message.startswith("When to"):
            return types.ElicitResult(action="accept", content={"dates": self.dates})
        if message.startswith("Book "):
            return types.ElicitResult(action="accept", content={"sure": True})
        if message.startswith("Go?"):
            return types.ElicitResult(action="accept", content={"go": True})
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        self.asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"short ({ANSWER})"),
            model="test-model",
            stop_reason="endTurn",
        )

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.asked.append("roots")
        return types.ListRootsResult(
            roots=[
                types.Root(uri="file:///home/erin/project", name="project"),  # type: ignore[arg-type]
                types.Root(uri="file:///srv/data"),  # type: ignore[arg-type]
            ]
        )


async def sdk_call(
    stack: LiveStack, token: str, tool: str, arguments: dict[str, Any], callbacks: Callbacks
) -> types.CallToolResult:
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(
            streamable_http_client(stack.server.mcp_url, http_client=http),
            elicitation_callback=callbacks.elicit,
            sampling_callback=callbacks.sample,
            list_roots_callback=callbacks.roots,
        ) as client,
    ):
        assert client.session.protocol_version == "2026-07-28"
        return await client.call_tool(tool, arguments)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize(
    ("tool", "arguments", "expected", "asked", "upstream_calls"),
    [
        ("confirm_delete", {"path": "/tmp/x"}, "Deleted /tmp/x", ["elicitation: Delete"], 2),
        ("summarize", {"text": "long"}, f"Summary: short ({ANSWER})", ["sampling"], 2),
        ("workspace", {}, "file:///home/erin/project file:///srv/data", ["roots"], 2),
        ("refresh", {}, "refreshed", [], 2),
        (
            "book_trip",
            {"city": "Paris"},
            "Booked Paris on 2026-08-01",
            ["elicitation: When to", "elicitation: Book "],
            3,
        ),
    ],
    ids=["elicitation", "sampling", "roots", "state-only", "two-rounds"],
)
async def test_the_official_sdk_client_completes_each_flow_through_the_gateway(  # noqa: PLR0917
    make_stack: MakeStack,
    tool: str,
    arguments: dict[str, Any],
    expected: str,
    asked: list[str],
    upstream_calls: int,
) -> None:
    upstream = InputUpstream()
    async with make_stack.of(input_stack, upstream=upstream) as stack:
        callbacks = Callbacks()
        result = await sdk_call(stack, stack.token(SCOPES), tool, arguments, callbacks)
    assert result.is_error is False
    assert text_of(result) == expected
    assert [a[: len(p)] for a, p in zip(callbacks.asked, asked, strict=True)] == asked
    sent = retries(upstream)
    assert len(sent) == upstream_calls
    assert all(params["arguments"] == arguments for params in sent)
    # The upstream got its own state back (or none, if it sent none), never the envelope.
    for params in sent:
        state = params.get("requestState")
        assert state is None or state.startswith("up:"), state


async def test_the_raw_wire_of_a_two_round_flow(make_stack: MakeStack) -> None:
    upstream = InputUpstream()
    async with make_stack.of(input_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES, sub="erin")
        args = {"city": "Oslo"}
        status, headers, first = await call(stack, token, "book_trip", args, rid=1)
        assert status == 200, first
        assert headers["Cache-Control"] == "no-store"
        validate_response("2026-07-28", first)
        validate_result("2026-07-28", "InputRequiredResult", first["result"])
        r1 = first["result"]
        assert r1["resultType"] == "input_required"
        assert list(r1["inputRequests"]) == ["dates"]
        assert r1["inputRequests"]["dates"]["method"] == "elicitation/create"
        assert r1["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
        sealed_1 = r1["requestState"]
        assert "up:" not in json.dumps(first)  # the upstream's own state stays behind the seal

        answer_1 = {"dates": {"action": "accept", "content": {"dates": "2026-09-09"}}}
        status, _, second = await call(
            stack, token, "book_trip", args, state=sealed_1, responses=answer_1, rid=2
        )
        assert status == 200, second
        r2 = second["result"]
        validate_result("2026-07-28", "InputRequiredResult", r2)
        assert list(r2["inputRequests"]) == ["sure"]
        sealed_2 = r2["requestState"]
        assert sealed_2 != sealed_1  # each round sealed afresh
        assert "up:" not in json.dumps(second)

        answer_2 = {"sure": {"action": "accept", "content": {"sure": True}}}
        status, _, third = await call(
            stack, token, "book_trip", args, state=sealed_2, responses=answer_2, rid=3
        )
        assert status == 200, third
        validate_response("2026-07-28", third, "tools/call")
        assert third["result"]["resultType"] == "complete"
        assert third["result"]["content"][0]["text"] == "Booked Oslo on 2026-09-09"

    sent = retries(upstream)
    assert [params.get("requestState") for params in sent] == [
        None,
        "up:book_trip:r1",
        "up:book_trip:r2:2026-09-09",
    ]
    assert [params.get("inputResponses") for params in sent] == [None, answer_1, answer_2]
    for recorded in upstream.tool_calls():
        body = recorded.body.decode()
        assert sealed_1 not in body and sealed_2 not in body  # never the envelope upstream
        assert token not in body and token not in json.dumps(dict(recorded.headers))


async def test_answers_are_rebuilt_only_asked_keys_go_upstream(make_stack: MakeStack) -> None:
    upstream = InputUpstream()
    async with make_stack.of(input_stack, upstream=upstream) as stack:
        token = stack.token(SCOPES)
        _, _, first = await call(stack, token, "confirm_delete", {"path": "/a"})
        answers = {
            "confirm": {"action": "accept", "content": {"confirm": True}},
            "unknown_extra_key": {"action": "accept", "content": {"foo": "bar"}},
            "another": 123,
        }
        status, _, done = await call(
            stack,
            token,
            "confirm_delete",
            {"path": "/a"},
            state=first["result"]["requestState"],
            responses=answers,
            rid=2,
        )
    assert status == 200, done
    assert done["result"]["content"][0]["text"] == "Deleted /a"
    # mrtr.mdx §Error Handling: what the server does not recognise is ignored (here: dropped).
    assert retries(upstream)[1]["inputResponses"] == {"confirm": answers["confirm"]}


async def test_every_round_is_an_audit_event_and_a_metric_never_the_contents(
    make_stack: MakeStack,
) -> None:
    async with make_stack.of(input_stack) as stack:
        token = stack.token(SCOPES, sub="erin")
        with structlog.testing.capture_logs() as logs:
            result = await sdk_call(stack, token, "everything", {}, Callbacks())
            assert result.is_error is False
            _, _, first = await call(stack, token, "book_trip", {"city": "Rome"}, rid=7)
        async with stack.session.get(stack.server.ops_url + "/metrics") as response:
            metrics = await response.text()
        events = [e for e in audit_events(stack) if e["event"] == "tool_call"]
    assert first["result"]["resultType"] == "input_required"
    rounds = [(e["tool"], e["outcome"], e.get("input")) for e in events]
    assert rounds == [
        (
            "everything",
            "input_required",
            {
                "round": 1,
                "requested": ["elicitation/create", "roots/list", "sampling/createMessage"],
            },
        ),
        (
            "everything",
            "ok",
            {
                "answers_round": 1,
                "answered": ["elicitation/create", "roots/list", "sampling/createMessage"],
                "policy_changed": False,
            },
        ),
        ("book_trip", "input_required", {"round": 1, "requested": ["elicitation/create"]}),
    ]
    assert 'mcp_gateway_input_rounds_total{event="relayed"} 2.0' in metrics
    assert 'mcp_gateway_input_rounds_total{event="resumed"} 1.0' in metrics
    assert 'mcp_gateway_input_requests_total{kind="sampling/createMessage"} 1.0' in metrics
    assert 'mcp_gateway_input_requests_total{kind="elicitation/create"} 2.0' in metrics
    assert (
        'mcp_gateway_backend_requests_total{backend="default",outcome="input_required",'
        'tool="everything"}'
    ) in metrics
    # What the user answered, the sealed state and the token appear in no log or audit line.
    trail = json.dumps(events) + repr(logs) + metrics
    for secret in (ANSWER, "file:///home/erin", first["result"]["requestState"], token):
        assert secret not in trail


async def test_a_retry_is_served_by_a_second_gateway_with_the_same_key(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = InputUpstream()
    async with contextlib.AsyncExitStack() as stacks:
        one = await stacks.enter_async_context(
            input_stack(tmp_path / "a", aiohttp_server, monkeypatch, upstream=upstream)
        )
        two = await stacks.enter_async_context(
            input_stack(
                tmp_path / "b",
                aiohttp_server,
                monkeypatch,
                issuer=one.issuer,
                backend_url=one.config.backend.url,
            )
        )
        assert one.server.mcp_url != two.server.mcp_url
        token = one.token(SCOPES)
        _, _, first = await call(one, token, "confirm_delete", {"path": "/r"})
        status, _, done = await call(
            two,
            token,
            "confirm_delete",
            {"path": "/r"},
            state=first["result"]["requestState"],
            responses={"confirm": {"action": "accept", "content": {"confirm": True}}},
            rid=2,
        )
    assert status == 200, done
    assert done["result"]["content"][0]["text"] == "Deleted /r"
    assert len(retries(upstream)) == 2


async def test_key_rotation_the_old_key_still_opens_the_new_key_seals(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.input_stack import KEY_A, KEY_B

    upstream = InputUpstream()
    async with (
        input_stack(
            tmp_path / "old", aiohttp_server, monkeypatch, upstream=upstream, keys={"k1": KEY_A}
        ) as old,
        input_stack(
            tmp_path / "new",
            aiohttp_server,
            monkeypatch,
            keys={"k1": KEY_A, "k2": KEY_B},
            seal_key_id="k2",
            issuer=old.issuer,
            backend_url=old.config.backend.url,
        ) as new,
    ):
        token = old.token(SCOPES)
        args = {"city": "Lima"}
        _, _, first = await call(old, token, "book_trip", args)
        sealed_k1 = first["result"]["requestState"]
        assert _key_id(sealed_k1) == "k1"
        answer = {"dates": {"action": "accept", "content": {"dates": "soon"}}}
        status, _, second = await call(
            new, token, "book_trip", args, state=sealed_k1, responses=answer, rid=2
        )
        assert status == 200, second  # the old key still opens
        sealed_k2 = second["result"]["requestState"]
        assert _key_id(sealed_k2) == "k2"  # the next round is sealed with the new key
        # A replica that has not got the new key yet cannot open it: the documented row.
        status, _, stale = await call(
            old,
            token,
            "book_trip",
            args,
            state=sealed_k2,
            responses={"sure": {"action": "accept"}},
            rid=3,
        )
        assert (status, stale["error"]["message"]) == (400, "Invalid requestState")
        status, _, done = await call(
            new,
            token,
            "book_trip",
            args,
            state=sealed_k2,
            responses={"sure": {"action": "accept"}},
            rid=4,
        )
    assert status == 200 and done["result"]["content"][0]["text"] == "Booked Lima on soon"
    assert len(retries(upstream)) == 3  # the refused retry never went upstream


def _key_id(sealed: str) -> str:
    raw = base64.urlsafe_b64decode(sealed + "=" * (-len(sealed) % 4))
    return raw[2 : 2 + raw[1]].decode()


def _prefixed_policy(*prefixes: str) -> str:
    rules = "".join(
        f"  {prefix}{tool['name']}: {{scopes: [tools:input]}}\n"
        for prefix in prefixes
        for tool in INPUT_TOOLS
    )
    return "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n" + rules


async def test_several_backends_each_round_is_bound_to_the_backend_that_asked(
    aiohttp_server: ServerFactory, make_stack: MakeStack
) -> None:
    docs, tickets = InputUpstream(), InputUpstream()
    backends = {}
    for name, upstream in (("docs", docs), ("tickets", tickets)):
        url = str((await aiohttp_server(upstream.app())).make_url("/mcp"))
        backends[name] = {"url": url, "allow_insecure_http": True, "credential": SERVICE_CREDENTIAL}
    async with make_stack.of(
        input_stack,
        backends=backends,
        policy=_prefixed_policy("docs__", "tickets__"),
    ) as stack:
        token = stack.token(SCOPES)
        args = {"city": "Bern"}
        _, _, first = await call(stack, token, "docs__book_trip", args)
        sealed = first["result"]["requestState"]
        answer = {"dates": {"action": "accept", "content": {"dates": "today"}}}
        status, _, wrong = await call(
            stack, token, "tickets__book_trip", args, state=sealed, responses=answer, rid=2
        )
        assert (status, wrong["error"]["message"]) == (
            400,
            "requestState does not match this request",
        )
        status, _, second = await call(
            stack, token, "docs__book_trip", args, state=sealed, responses=answer, rid=3
        )
        assert status == 200 and second["result"]["resultType"] == "input_required", second
        events = [e for e in audit_events(stack) if e["event"] == "tool_call"]
    assert retries(tickets) == []
    assert [params["name"] for params in retries(docs)] == ["book_trip", "book_trip"]
    assert [e.get("backend") for e in events] == ["docs", "tickets", "docs"]


async def test_a_state_sealed_for_one_backend_is_refused_where_the_tool_has_another_owner(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two deployments sharing a key and the resource, each with one unprefixed backend that
    # offers the same tool name: only the backend binding tells the rounds apart.
    first_up, second_up = InputUpstream(), InputUpstream()
    urls = [str((await aiohttp_server(u.app())).make_url("/mcp")) for u in (first_up, second_up)]

    def only(name: str, url: str) -> dict[str, Any]:
        return {
            name: {
                "url": url,
                "allow_insecure_http": True,
                "prefix": "",
                "credential": SERVICE_CREDENTIAL,
            }
        }

    async with contextlib.AsyncExitStack() as stacks:
        one = await stacks.enter_async_context(
            input_stack(tmp_path / "a", aiohttp_server, monkeypatch, backends=only("docs", urls[0]))
        )
        two = await stacks.enter_async_context(
            input_stack(
                tmp_path / "b",
                aiohttp_server,
                monkeypatch,
                issuer=one.issuer,
                backends=only("tickets", urls[1]),
            )
        )
        token = one.token(SCOPES)
        _, _, first = await call(one, token, "confirm_delete", {"path": "/x"})
        status, _, body = await call(
            two,
            token,
            "confirm_delete",
            {"path": "/x"},
            state=first["result"]["requestState"],
            responses={"confirm": {"action": "accept", "content": {"confirm": True}}},
            rid=2,
        )
        events = audit_events(two)
    assert (status, body["error"]["message"]) == (400, "requestState does not match this request")
    assert retries(second_up) == []
    assert events[-1]["input"] == {"refused": "mismatch"}
