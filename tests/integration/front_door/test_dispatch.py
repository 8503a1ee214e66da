"""Successful exchanges through the front door, each validated against the official schema."""

from __future__ import annotations

import asyncio
import json

import pytest

from gateway.errors import FORBIDDEN_CODE
from tests.integration.front_door.conftest import MakeGateway
from tests.support.assertions import assert_error, assert_json_ok
from tests.support.gateway_harness import (
    MODERN,
    Gateway,
    legacy_headers,
    modern_headers,
    modern_request,
)
from tests.support.schemas import validate_response

BASELINE_TOOLS = {"echo", "fail", "slow", "progress", "big", "crash", "progress_crash"}
"""The fake catalog's tools whose rule needs only the baseline scope."""
DOCS_TOOLS = {"region_lookup", "search_docs"}


class TestModern:
    async def test_discover_advertises_versions_tools_and_server_info(self, gw: Gateway) -> None:
        response = await gw.post(
            modern_request("server/discover", "d1"), modern_headers("server/discover")
        )
        payload = await assert_json_ok(response)
        validate_response(MODERN, payload, "server/discover")
        result = payload["result"]
        assert payload["id"] == "d1"
        assert result["supportedVersions"] == [MODERN]
        assert "tools" in result["capabilities"]
        assert result["resultType"] == "complete"
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "front-door-test"

    @pytest.mark.parametrize(
        ("token", "expected"),
        [
            ("basic", BASELINE_TOOLS),
            ("good", BASELINE_TOOLS | DOCS_TOOLS),
            ("ops", BASELINE_TOOLS | DOCS_TOOLS | {"create_ticket", "admin_reset"}),
        ],
        ids=["baseline only", "docs reader", "ops console"],
    )
    async def test_tools_list_shows_only_the_tools_the_caller_may_call(
        self, gw: Gateway, token: str, expected: set[str]
    ) -> None:
        headers = modern_headers("tools/list", Authorization=f"Bearer {token}")
        payload = await assert_json_ok(await gw.post(modern_request("tools/list", 2), headers))
        validate_response(MODERN, payload, "tools/list")
        names = [tool["name"] for tool in payload["result"]["tools"]]
        assert set(names) == expected
        assert names == sorted(names)
        assert payload["result"]["cacheScope"] == "private"
        assert "unlisted_tool" not in names

    async def test_tools_call_returns_the_backend_result_with_result_type(
        self, gw: Gateway
    ) -> None:
        payload = await assert_json_ok(await gw.call_tool("echo", {"text": "héllo"}))
        validate_response(MODERN, payload, "tools/call")
        assert payload["result"]["content"] == [{"type": "text", "text": "héllo"}]
        assert payload["result"]["resultType"] == "complete"
        (recorded,) = gw.backend.calls
        assert recorded.call.arguments == {"text": "héllo"}
        assert recorded.principal.subject == "alice"
        ctx = gw.observer.finished[-1]
        assert (ctx.method, ctx.tool, ctx.status, ctx.outcome) == ("tools/call", "echo", 200, "ok")
        assert ctx.era == "modern" and ctx.decision is not None and ctx.decision.allowed

    async def test_the_backend_deadline_is_the_request_deadline(self, gw: Gateway) -> None:
        await assert_json_ok(await gw.call_tool("echo", {"text": "x"}))
        (recorded,) = gw.backend.calls
        ctx = gw.observer.finished[-1]
        assert recorded.deadline == pytest.approx(ctx.started + gw.config.limits.request_deadline_s)

    @pytest.mark.row("tool_error_result")
    async def test_a_failing_tool_is_a_200_tool_error_result(self, gw: Gateway) -> None:
        payload = await assert_json_ok(await gw.call_tool("fail"))
        validate_response(MODERN, payload, "tools/call")
        assert payload["result"]["isError"] is True
        assert gw.observer.finished[-1].outcome == "tool_error"

    @pytest.mark.row("tool_error_result")
    async def test_an_oversized_tool_result_becomes_a_fixed_tool_error(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(max_response_bytes=2048)
        ok = await assert_json_ok(await gw.call_tool("big", {"size": 1500}))
        assert ok["result"]["isError"] is False
        payload = await assert_json_ok(await gw.call_tool("big", {"size": 2048}))
        validate_response(MODERN, payload, "tools/call")
        assert payload["result"]["isError"] is True
        assert "size limit" in payload["result"]["content"][0]["text"]

    @pytest.mark.row("internal_error")
    async def test_an_unexpected_backend_exception_is_500_internal_error_without_detail(
        self, gw: Gateway
    ) -> None:
        response = await gw.call_tool("crash")
        payload = await assert_error(response, 500, -32603, request_id=7)
        assert payload is not None and payload["error"]["message"] == "Internal error"
        assert gw.observer.finished[-1].error_row == "internal_error"

    @pytest.mark.row("backend_failure")
    async def test_a_non_tool_result_over_the_response_cap_is_backend_failure(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(max_response_bytes=300)
        response = await gw.post(modern_request("tools/list", 4), modern_headers("tools/list"))
        await assert_error(response, 502, -32603, request_id=4)
        legacy = await gw.post(
            {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, legacy_headers()
        )
        await assert_error(legacy, 200, -32603, request_id=5)

    async def test_header_params_are_handed_to_the_backend(self, gw: Gateway) -> None:
        body = modern_request(
            "tools/call", 3, {"name": "region_lookup", "arguments": {"region": "eu"}}
        )
        headers = modern_headers("tools/call", "region_lookup", **{"Mcp-Param-Region": "eu"})
        payload = await assert_json_ok(await gw.post(body, headers))
        validate_response(MODERN, payload, "tools/call")
        assert dict(gw.backend.calls[0].call.header_params) == {"Region": "eu"}

    async def test_a_missing_header_param_is_a_header_mismatch(self, gw: Gateway) -> None:
        body = modern_request(
            "tools/call", 3, {"name": "region_lookup", "arguments": {"region": "eu"}}
        )
        response = await gw.post(body, modern_headers("tools/call", "region_lookup"))
        await assert_error(response, 400, -32020, request_id=3)

    async def test_a_session_id_is_ignored_and_never_minted(self, gw: Gateway) -> None:
        headers = modern_headers("server/discover", **{"Mcp-Session-Id": "abc"})
        response = await gw.post(modern_request("server/discover", 1), headers)
        await assert_json_ok(response)

    async def test_progress_switches_to_sse_and_ends_with_the_response(self, gw: Gateway) -> None:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": "p1",
        }
        body = modern_request(
            "tools/call", 11, {"name": "progress", "arguments": {"steps": 2}}, meta=meta
        )
        response = await gw.post(body, modern_headers("tools/call", "progress"))
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        assert response.headers["X-Accel-Buffering"] == "no"
        assert response.headers["Cache-Control"] == "no-store"
        text = (await response.read()).decode()
        events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
        assert [e["params"]["progress"] for e in events[:-1]] == [1, 2]
        assert all(e["method"] == "notifications/progress" for e in events[:-1])
        assert events[-1]["id"] == 11
        validate_response(MODERN, events[-1], "tools/call")

    async def test_a_failure_after_the_stream_started_is_the_last_event(self, gw: Gateway) -> None:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": "p2",
        }
        body = modern_request("tools/call", 13, {"name": "progress_crash"}, meta=meta)
        response = await gw.post(body, modern_headers("tools/call", "progress_crash"))
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        text = (await response.read()).decode()
        events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
        assert events[0]["method"] == "notifications/progress"
        assert events[-1] == {
            "jsonrpc": "2.0",
            "id": 13,
            "error": {"code": -32603, "message": "Internal error"},
        }
        assert gw.observer.finished[-1].error_row == "internal_error"

    async def test_a_client_disconnect_cancels_the_backend_call_and_frees_its_slots(
        self, gw: Gateway
    ) -> None:
        task = asyncio.create_task(gw.call_tool("slow", {"seconds": 30}))
        async with asyncio.timeout(5):
            while not gw.backend.calls:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        task.cancel()
        async with asyncio.timeout(5):
            while gw.backend.cancelled == 0:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        async with asyncio.timeout(5):
            while gw.endpoint.in_flight:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        ctx = gw.observer.finished[-1]
        assert (ctx.status, ctx.outcome) == (499, "cancelled")
        gw.backend.release.set()
        # The per-subject concurrency slot of "slow" (max_concurrency 1) was released.
        await assert_json_ok(await gw.call_tool("slow", {"seconds": 30}))

    async def test_progress_without_sse_in_accept_stays_json(self, gw: Gateway) -> None:
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": 5,
        }
        body = modern_request(
            "tools/call", 12, {"name": "progress", "arguments": {"steps": 2}}, meta=meta
        )
        headers = modern_headers("tools/call", "progress", Accept="application/json")
        payload = await assert_json_ok(await gw.post(body, headers))
        validate_response(MODERN, payload, "tools/call")
        assert gw.backend.calls[0].call.on_progress is None


class TestLegacy:
    @pytest.mark.row("invalid_params")
    async def test_initialize_with_bad_params_is_answered_200_invalid_params(
        self, gw: Gateway
    ) -> None:
        body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}}
        await assert_error(await gw.post(body, legacy_headers(None)), 200, -32602, request_id=0)

    @pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25", "2025-03-26"])
    async def test_initialize_answers_with_the_clients_version(
        self, gw: Gateway, version: str
    ) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "codex-mcp-client", "version": "0.1"},
            },
        }
        payload = await assert_json_ok(
            await gw.post(body, legacy_headers(None)), revision=version, method="initialize"
        )
        assert payload["result"]["protocolVersion"] == version

    async def test_ping_tools_list_and_call_work_without_a_session(self, gw: Gateway) -> None:
        version = "2025-06-18"
        ping = await assert_json_ok(
            await gw.post({"jsonrpc": "2.0", "id": "p", "method": "ping"}, legacy_headers(version)),
            revision=version,
            method="ping",
        )
        assert ping["result"] == {}
        listed = await assert_json_ok(
            await gw.post(
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, legacy_headers(version)
            ),
            revision=version,
            method="tools/list",
        )
        assert "resultType" not in listed["result"]
        called = await assert_json_ok(
            await gw.post(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "hi"}},
                },
                legacy_headers(version),
            ),
            revision=version,
            method="tools/call",
        )
        assert called["result"]["content"][0]["text"] == "hi"

    async def test_a_2025_03_26_batch_gets_one_array_without_notification_entries(
        self, gw: Gateway
    ) -> None:
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "b"}},
            },
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope"}},
        ]
        response = await gw.post(batch, legacy_headers("2025-03-26"))
        payload = await response.json()
        assert response.status == 200
        assert response.headers["Cache-Control"] == "no-store"
        assert [entry["id"] for entry in payload] == [1, 2, 3]
        for entry in payload:
            validate_response("2025-03-26", entry)
        assert payload[2]["error"]["code"] == -32602

    @pytest.mark.row("tool_insufficient_scope")
    async def test_a_step_up_inside_a_batch_answers_the_whole_batch_403(self, gw: Gateway) -> None:
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "create_ticket", "arguments": {}},
            },
        ]
        response = await gw.post(batch, legacy_headers("2025-03-26"))
        # One JSON-RPC error for the whole batch: its id is null, not one member's.
        payload = await assert_error(response, 403, FORBIDDEN_CODE, request_id=None)
        assert 'scope="mcp:access tickets:write"' in response.headers["WWW-Authenticate"]
        assert payload is not None
        assert payload["error"]["message"] == "Insufficient scope: requires tickets:write"

    @pytest.mark.parametrize("budget", [1700, 1450, 400])
    async def test_a_batch_shares_one_response_budget(
        self, make_gw: MakeGateway, budget: int
    ) -> None:
        gw = await make_gw(max_response_bytes=budget)
        call = {
            "jsonrpc": "2.0",
            "method": "tools/call",
            "params": {"name": "big", "arguments": {"size": 600}},
        }
        batch = [{**call, "id": 1}, {**call, "id": 2}, {**call, "id": 3}]
        response = await gw.post(batch, legacy_headers("2025-03-26"))
        assert response.status == 200
        assert len(await response.read()) <= budget
        payload = await response.json()
        assert [entry["id"] for entry in payload] == [1, 2, 3]
        for entry in payload:
            validate_response("2025-03-26", entry)
        # An entry that does not fit (keeping room for the smallest answer to each later one)
        # becomes the fixed oversize tool error, or -32603 when not even that fits.
        shapes = [
            "error" if "error" in entry else ("tool_error" if entry["result"]["isError"] else "ok")
            for entry in payload
        ]
        assert (
            shapes
            == {
                1700: ["ok", "ok", "tool_error"],
                1450: ["ok", "tool_error", "tool_error"],
                400: ["tool_error", "tool_error", "error"],
            }[budget]
        )
        assert all(entry["error"]["code"] == -32603 for entry in payload if "error" in entry)

    @pytest.mark.row("accepted_notification")
    async def test_an_all_notification_batch_is_202(self, gw: Gateway) -> None:
        batch = [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
        response = await gw.post(batch, legacy_headers(None))
        assert response.status == 202
        assert await response.read() == b""


class TestMetadataRoutes:
    @pytest.mark.parametrize(
        "path",
        ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"],
    )
    async def test_protected_resource_metadata_is_public_at_both_paths(
        self, gw: Gateway, path: str
    ) -> None:
        response = await gw.client.get(path, headers={"MCP-Protocol-Version": "2024-11-05"})
        assert response.status == 200
        assert response.headers["Cache-Control"] == "public, max-age=300"
        assert response.headers["Access-Control-Allow-Origin"] == "*"
        document = await response.json()
        assert document["resource"] == "https://mcp.example.com/mcp"
        head = await gw.client.head(path)
        assert head.status == 200
        assert gw.authenticator.calls == 0
