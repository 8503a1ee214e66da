"""The demo MCP backend over real HTTP: both eras, the service-token check, the tools."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any, Final

import aiohttp
import pytest

from gateway.dev.demo_backend import DemoBackend
from tests.integration.dev.conftest import SERVICE_TOKEN
from tests.support.dev_http import HttpClient, http_client
from tests.support.mcp_client import legacy_initialize_body, modern_body, modern_headers
from tests.support.schemas import validate_response

MODERN = "2026-07-28"
AUTH = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _modern(method: str, params: dict[str, Any] | None = None, rid: Any = 1) -> dict[str, Any]:
    return modern_body(method, params, rid=rid)


def _modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    return modern_headers(SERVICE_TOKEN, method, name)


async def _post(
    http: HttpClient, backend: DemoBackend, body: Any, headers: dict[str, str]
) -> tuple[int, Any, aiohttp.ClientResponse]:
    response = await http.post(backend.url, json=body, headers=headers)
    raw = await response.read()
    return response.status, (json.loads(raw) if raw else None), response


async def _ask(
    http: HttpClient, backend: DemoBackend, method: str
) -> tuple[int, Any, aiohttp.ClientResponse]:
    """One 2026-07-28 ``method`` request with the service token."""
    return await _post(http, backend, _modern(method), _modern_headers(method))


async def _call(
    http: HttpClient,
    backend: DemoBackend,
    tool: str,
    arguments: dict[str, Any],
    *,
    name: str | None = None,
    rid: int = 1,
) -> tuple[int, Any, aiohttp.ClientResponse]:
    """A 2026-07-28 ``tools/call`` with the service token (``Mcp-Name``: ``name`` or ``tool``)."""
    body = _modern("tools/call", {"name": tool, "arguments": arguments}, rid=rid)
    return await _post(http, backend, body, _modern_headers("tools/call", name or tool))


class TestServiceToken:
    @pytest.mark.parametrize(
        ("headers", "error"),
        [({}, False), ({"Authorization": "Bearer someone-elses-token"}, True)],
        ids=["no Authorization", "Bearer <wrong token>"],
    )
    async def test_anything_but_the_service_token_is_answered_401(
        self,
        backend: DemoBackend,
        http: HttpClient,
        headers: dict[str, str],
        error: bool,
    ) -> None:
        response = await http.post(backend.url, json=_modern("tools/list"), headers=headers)
        assert response.status == 401
        challenge = response.headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer ")
        assert ('error="invalid_token"' in challenge) is error
        assert backend.auth_failures == 1

    async def test_every_request_is_recorded_with_its_headers(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        await http.post(
            backend.url, json=_modern("tools/list"), headers=_modern_headers("tools/list")
        )
        assert backend.received[-1].header("authorization") == f"Bearer {SERVICE_TOKEN}"
        assert backend.saw(SERVICE_TOKEN)
        assert not backend.saw("a-client-token")


class TestModernEra:
    async def test_server_discover_answers_a_valid_2026_result(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        status, body, response = await _ask(http, backend, "server/discover")
        assert status == 200
        validate_response(MODERN, body, "server/discover")
        assert body["result"]["supportedVersions"] == [MODERN]
        assert "Mcp-Session-Id" not in response.headers

    async def test_tools_list_has_five_closed_schemas(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        status, body, _ = await _ask(http, backend, "tools/list")
        assert status == 200
        validate_response(MODERN, body, "tools/list")
        tools = body["result"]["tools"]
        assert [t["name"] for t in tools] == [
            "echo",
            "time_now",
            "notes_list",
            "notes_add",
            "admin_reset",
            "notes_compose",
            "notes_summarize",
            "workspace_roots",
            "notes_report",
            "whoami",
        ]
        assert all(t["inputSchema"]["additionalProperties"] is False for t in tools)

    async def test_notes_added_by_a_writer_are_listed(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        status, body, _ = await _call(http, backend, "notes_add", {"text": "hello"})
        assert status == 200
        validate_response(MODERN, body, "tools/call")
        _, body, _ = await _call(http, backend, "notes_list", {}, rid=2)
        assert body["result"]["structuredContent"]["notes"][0]["text"] == "hello"

    async def test_a_base64_encoded_mcp_name_is_decoded_before_comparing(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        name = "=?base64?ZWNobw==?="
        status, body, _ = await _call(http, backend, "echo", {"text": "hi"}, name=name)
        assert status == 200
        assert body["result"]["content"][0]["text"] == "hi"

    @pytest.mark.parametrize(
        ("headers", "code"),
        [
            (_modern_headers("tools/list"), -32020),
            (_modern_headers("tools/call", "notes_add"), -32020),
            ({**AUTH, **ACCEPT, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}, -32020),
        ],
        ids=["Mcp-Method mismatch", "Mcp-Name mismatch", "no MCP-Protocol-Version"],
    )
    async def test_header_body_mismatches_are_answered_400_header_mismatch(
        self, backend: DemoBackend, http: HttpClient, headers: dict[str, str], code: int
    ) -> None:
        call = _modern("tools/call", {"name": "echo", "arguments": {"text": "x"}})
        status, body, _ = await _post(http, backend, call, headers)
        assert status == 400
        assert body["error"]["code"] == code
        assert body["id"] == 1

    async def test_missing_meta_keys_are_answered_400_invalid_params(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        body = {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}}
        status, reply, _ = await _post(http, backend, body, _modern_headers("tools/list"))
        assert (status, reply["error"]["code"]) == (400, -32602)

    async def test_an_unsupported_version_is_answered_400_with_the_supported_list(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        body = _modern("tools/list")
        body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2099-01-01"
        headers = {**_modern_headers("tools/list"), "MCP-Protocol-Version": "2099-01-01"}
        status, reply, _ = await _post(http, backend, body, headers)
        assert status == 400
        assert reply["error"]["code"] == -32022
        assert reply["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}

    async def test_removed_methods_are_answered_404_method_not_found(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        status, reply, _ = await _ask(http, backend, "ping")
        assert (status, reply["error"]["code"]) == (404, -32601)

    async def test_bad_arguments_are_a_tool_error_not_a_protocol_error(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        status, body, _ = await _call(http, backend, "echo", {"text": "x", "extra": 1})
        assert status == 200
        assert body["result"]["isError"] is True

    async def test_an_unknown_tool_is_answered_400_invalid_params(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        status, body, _ = await _call(http, backend, "rm_rf", {})
        assert (status, body["error"]["code"]) == (400, -32602)


class TestLegacyEra:
    @pytest.mark.parametrize(
        ("requested", "answered"),
        [("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25"), ("2024-11-05", "2025-11-25")],
        ids=["2025-06-18 echoed", "2025-11-25 echoed", "2024-11-05 counter-offered"],
    )
    async def test_initialize_negotiates_without_a_session(
        self, backend: DemoBackend, http: HttpClient, requested: str, answered: str
    ) -> None:
        body = legacy_initialize_body(requested)
        status, reply, response = await _post(http, backend, body, {**AUTH, **ACCEPT})
        assert status == 200
        assert reply["result"]["protocolVersion"] == answered
        validate_response("2025-06-18", reply, "initialize")
        assert "Mcp-Session-Id" not in response.headers

    async def test_the_initialized_notification_is_accepted_with_202(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        status, reply, _ = await _post(
            http, backend, note, {**AUTH, **ACCEPT, "MCP-Protocol-Version": "2025-06-18"}
        )
        assert (status, reply) == (202, None)

    async def test_legacy_tools_list_and_call_follow_the_2025_schema(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        headers = {**AUTH, **ACCEPT, "MCP-Protocol-Version": "2025-06-18"}
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        _, reply, _ = await _post(http, backend, listing, headers)
        validate_response("2025-06-18", reply, "tools/list")
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "time_now", "arguments": {}},
        }
        _, reply, _ = await _post(http, backend, call, headers)
        validate_response("2025-06-18", reply, "tools/call")
        assert "resultType" not in reply["result"]

    @pytest.mark.parametrize(
        ("message", "code"),
        [
            ({"jsonrpc": "2.0", "id": 3, "method": "server/discover"}, -32601),
            (
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope"}},
                -32602,
            ),
        ],
        ids=["server/discover on the legacy path", "unknown tool"],
    )
    async def test_legacy_json_rpc_errors_go_out_with_http_200(
        self, backend: DemoBackend, http: HttpClient, message: dict[str, Any], code: int
    ) -> None:
        status, reply, _ = await _post(http, backend, message, {**AUTH, **ACCEPT})
        assert (status, reply["error"]["code"], reply["id"]) == (200, code, 3)

    async def test_get_and_delete_are_answered_405_allow_post(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        for method in ("GET", "DELETE"):
            response = await http.request(method, backend.url, headers=AUTH)
            assert response.status == 405
            assert response.headers["Allow"] == "POST"


async def test_the_sse_knob_answers_with_an_event_stream() -> None:
    async with DemoBackend(service_token=SERVICE_TOKEN, sse=True) as backend, http_client() as http:
        response = await http.post(
            backend.url, json=_modern("tools/list"), headers=_modern_headers("tools/list")
        )
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert (await response.text()).startswith("event: message\ndata: {")


def test_a_backend_without_a_service_token_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="service_token"):
        DemoBackend()


TASKS_CAPS: Final = MappingProxyType({"extensions": {"io.modelcontextprotocol/tasks": {}}})


class TestTasks:
    """The slow tool and the tasks extension's methods (gateway/dev/demo_tasks.py, SEP-2663)."""

    async def _task(
        self, http: HttpClient, backend: DemoBackend, method: str, task_id: str, **kw: Any
    ) -> tuple[int, Any]:
        body = modern_body(method, {"taskId": task_id}, capabilities=kw.get("caps", TASKS_CAPS))
        headers = _modern_headers(method, kw.get("name", task_id))
        status, answer, _ = await _post(http, backend, body, headers)
        return status, answer

    async def test_a_declaring_call_is_a_task_polled_and_cancelled(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        body = modern_body(
            "tools/call",
            {"name": "notes_report", "arguments": {"seconds": 30}},
            capabilities=TASKS_CAPS,
        )
        status, created, _ = await _post(
            http, backend, body, _modern_headers("tools/call", "notes_report")
        )
        assert status == 200 and created["result"]["resultType"] == "task"
        task_id = created["result"]["taskId"]
        assert len(task_id) >= 20  # random: unguessable
        status, got = await self._task(http, backend, "tasks/get", task_id)
        assert status == 200 and got["result"]["status"] == "working"
        assert (await self._task(http, backend, "tasks/cancel", task_id))[0] == 200
        status, got = await self._task(http, backend, "tasks/get", task_id)
        assert got["result"]["status"] == "cancelled"

    async def test_the_extensions_refusals(self, backend: DemoBackend, http: HttpClient) -> None:
        status, got = await self._task(http, backend, "tasks/get", "nope")
        assert status == 400 and got["error"]["code"] == -32602
        status, got = await self._task(http, backend, "tasks/get", "nope", caps={})
        assert status == 400 and got["error"]["code"] == -32021
        status, got = await self._task(http, backend, "tasks/get", "nope", name="other")
        assert status == 400 and got["error"]["code"] == -32020

    async def test_without_the_extension_the_report_comes_at_once(
        self, backend: DemoBackend, http: HttpClient
    ) -> None:
        status, body, _ = await _call(http, backend, "notes_report", {"seconds": 30})
        assert status == 200 and body["result"]["resultType"] == "complete"
        assert body["result"]["content"][0]["text"].startswith("Report on 0 note(s)")
