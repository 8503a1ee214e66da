"""JSON-RPC rows of the status table on the wire (pipeline steps 12-17), both eras."""

from __future__ import annotations

import json

import pytest

from tests.support.assertions import assert_error
from tests.support.gateway_harness import (
    MODERN,
    Gateway,
    legacy_headers,
    modern_headers,
    modern_request,
)


class TestDecoding:
    @pytest.mark.row("parse_error")
    @pytest.mark.parametrize(
        "body",
        [b"{", b"not json", b'{"a":1} trailing', b"\xff\xfe{}", b'{"a":1,"a":2}', b""],
        ids=["truncated", "not json", "trailing data", "not utf-8", "duplicate keys", "empty"],
    )
    async def test_a_body_that_is_not_strict_json_is_answered_400_parse_error_id_null(
        self, gw: Gateway, body: bytes
    ) -> None:
        response = await gw.post(body, modern_headers("server/discover"))
        payload = await assert_error(response, 400, -32700, request_id=None)
        assert payload is not None and payload["error"]["message"] == "Parse error"

    @pytest.mark.row("invalid_request")
    @pytest.mark.parametrize(
        "body",
        [
            [modern_request("server/discover", 1)],
            {"jsonrpc": "2.0", "id": None, "method": "server/discover"},
            {"jsonrpc": "2.0", "id": True, "method": "server/discover"},
            {"jsonrpc": "2.0", "id": 1.5, "method": "server/discover"},
            "just a string",
        ],
        ids=[
            "batch on modern",
            "id null",
            "id boolean",
            "id fractional",
            "not an object",
        ],
    )
    async def test_a_malformed_envelope_is_answered_400_invalid_request_id_null(
        self, gw: Gateway, body: object
    ) -> None:
        response = await gw.post(json.dumps(body).encode(), modern_headers("server/discover"))
        await assert_error(response, 400, -32600, request_id=None)

    @pytest.mark.row("invalid_request")
    @pytest.mark.parametrize(
        "body",
        [
            {"jsonrpc": "2.0", "id": 1, "result": {}},
            {"jsonrpc": "1.0", "id": 1, "method": "server/discover"},
            {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "extra": 1},
        ],
        ids=["posted response", "wrong jsonrpc", "unknown member"],
    )
    async def test_a_bad_envelope_with_a_readable_id_is_answered_400_with_that_id(
        self, gw: Gateway, body: object
    ) -> None:
        response = await gw.post(json.dumps(body).encode(), modern_headers("server/discover"))
        await assert_error(response, 400, -32600, request_id=1)


class TestModernValidation:
    @pytest.mark.row("header_mismatch")
    @pytest.mark.parametrize(
        ("header", "value"),
        [("Mcp-Method", "tools/list"), ("MCP-Protocol-Version", None), ("Mcp-Method", None)],
        ids=["method differs", "version header missing", "method header missing"],
    )
    async def test_a_header_that_disagrees_with_the_body_is_answered_400_header_mismatch(
        self, gw: Gateway, header: str, value: str | None
    ) -> None:
        headers = modern_headers("server/discover")
        if value is None:
            del headers[header]
        else:
            headers[header] = value
        response = await gw.post(modern_request("server/discover", 5), headers)
        await assert_error(response, 400, -32020, request_id=5)

    @pytest.mark.row("header_mismatch")
    async def test_a_tool_name_header_that_differs_is_answered_400_header_mismatch(
        self, gw: Gateway
    ) -> None:
        body = modern_request("tools/call", 6, {"name": "echo", "arguments": {}})
        response = await gw.post(body, modern_headers("tools/call", "fail"))
        await assert_error(response, 400, -32020, request_id=6)
        assert gw.backend.calls == []

    @pytest.mark.row("invalid_params")
    @pytest.mark.parametrize(
        "meta",
        [{}, {"io.modelcontextprotocol/protocolVersion": MODERN}],
        ids=["empty _meta", "no clientCapabilities"],
    )
    async def test_missing_meta_keys_are_answered_400_invalid_params(
        self, gw: Gateway, meta: dict[str, object]
    ) -> None:
        response = await gw.post(
            modern_request("server/discover", 8, meta=meta), modern_headers("server/discover")
        )
        await assert_error(response, 400, -32602, request_id=8)

    @pytest.mark.row("unsupported_version")
    async def test_an_unknown_version_is_answered_400_with_supported_and_requested(
        self, gw: Gateway
    ) -> None:
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2099-01-01",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers = modern_headers("server/discover", **{"MCP-Protocol-Version": "2099-01-01"})
        response = await gw.post(modern_request("server/discover", 9, meta=meta), headers)
        payload = await assert_error(response, 400, -32022, request_id=9)
        assert payload is not None
        assert payload["error"]["data"] == {"supported": [MODERN], "requested": "2099-01-01"}

    @pytest.mark.row("method_not_found")
    @pytest.mark.parametrize("method", ["ping", "initialize", "resources/list", "unknown/method"])
    async def test_a_removed_or_unknown_method_on_the_modern_path_is_answered_404(
        self, gw: Gateway, method: str
    ) -> None:
        response = await gw.post(modern_request(method, 10), modern_headers(method))
        await assert_error(response, 404, -32601, request_id=10)

    @pytest.mark.row("unknown_tool")
    @pytest.mark.parametrize(
        "tool",
        ["no_such_tool", "admin_reset", "unlisted_tool"],
        ids=["absent", "hidden by clients", "no rule"],
    )
    async def test_a_tool_the_caller_may_not_see_is_answered_like_a_missing_one(
        self, gw: Gateway, tool: str
    ) -> None:
        response = await gw.call_tool(tool)
        payload = await assert_error(response, 400, -32602, request_id=7)
        assert payload is not None and payload["error"]["message"] == "Unknown tool"
        assert gw.backend.calls == []

    @pytest.mark.row("accepted_notification")
    async def test_a_modern_notification_is_answered_202_empty(self, gw: Gateway) -> None:
        body = modern_request("notifications/cancelled", None, {"requestId": 1})
        response = await gw.post(body, modern_headers("notifications/cancelled"))
        assert response.status == 202
        assert await response.read() == b""
        assert response.headers["Cache-Control"] == "no-store"


class TestLegacyPath:
    @pytest.mark.row("method_not_found")
    @pytest.mark.parametrize("method", ["resources/list", "server/discover", "logging/setLevel"])
    async def test_an_unknown_method_on_the_legacy_path_is_answered_200_method_not_found(
        self, gw: Gateway, method: str
    ) -> None:
        body = {"jsonrpc": "2.0", "id": "x1", "method": method, "params": {}}
        response = await gw.post(body, legacy_headers())
        await assert_error(response, 200, -32601, request_id="x1")

    @pytest.mark.row("unknown_tool")
    async def test_an_unknown_tool_on_the_legacy_path_is_answered_200_invalid_params(
        self, gw: Gateway
    ) -> None:
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope"}}
        response = await gw.post(body, legacy_headers())
        await assert_error(response, 200, -32602, request_id=3)

    @pytest.mark.row("accepted_notification")
    async def test_notifications_initialized_is_answered_202_empty(self, gw: Gateway) -> None:
        body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        response = await gw.post(body, legacy_headers())
        assert response.status == 202
        assert await response.read() == b""

    @pytest.mark.row("unsupported_version")
    async def test_an_unsupported_legacy_version_header_is_answered_400(self, gw: Gateway) -> None:
        body = {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}
        response = await gw.post(body, legacy_headers("2024-11-05"))
        payload = await assert_error(response, 400, -32022, request_id=4)
        assert payload is not None and payload["error"]["data"]["requested"] == "2024-11-05"
