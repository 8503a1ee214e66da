"""The legacy initialize profile (2025-03-26 / 2025-06-18 / 2025-11-25) and 2025-03-26 batches."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import CIMultiDict

from gateway.errors import (
    GatewayError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    UnsupportedProtocolVersion,
)
from gateway.protocol.classify import MAX_BATCH, classify
from gateway.protocol.messages import McpMessage
from gateway.protocol.versions import LEGACY, MODERN, SUPPORTED, is_legacy
from tests.support.protocol import headers, lookup, modern_body, request

NO_HEADERS: CIMultiDict[str] = headers()
INIT_PARAMS = {
    "protocolVersion": "2025-06-18",
    "capabilities": {"roots": {}},
    "clientInfo": {"name": "codex-mcp-client", "version": "0.169.0"},
}


def version_header(version: str) -> CIMultiDict[str]:
    return headers(("MCP-Protocol-Version", version))


def admit(hdrs: CIMultiDict[str], body: Any) -> McpMessage:
    result = classify(hdrs, body, lookup())
    assert isinstance(result, McpMessage)
    return result


def refuse(
    cls: type[GatewayError], hdrs: CIMultiDict[str], body: Any, *, request_id: Any = 1
) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        classify(hdrs, body, lookup())
    error = caught.value
    assert type(error) is cls, f"{type(error).__name__}: {error.detail}"
    assert error.request_id == request_id
    assert error.era == "legacy"
    return error


class TestInitialize:
    @pytest.mark.parametrize("version", LEGACY)
    def test_a_supported_version_is_echoed(self, version: str) -> None:
        message = admit(
            NO_HEADERS, request("initialize", {**INIT_PARAMS, "protocolVersion": version}, id=0)
        )
        assert (message.era, message.version, message.id) == ("legacy", version, 0)
        assert message.client_capabilities == {"roots": {}}

    @pytest.mark.parametrize("version", ["2026-07-28", "2024-11-05", "1.0", ""])
    def test_another_version_gets_the_newest_legacy_counter_offer(self, version: str) -> None:
        params = {**INIT_PARAMS, "protocolVersion": version}
        assert admit(NO_HEADERS, request("initialize", params)).version == LEGACY[0]

    def test_initialize_may_carry_a_legacy_version_header_and_mcp_method(self) -> None:
        hdrs = headers(("MCP-Protocol-Version", "2025-06-18"), ("Mcp-Method", "initialize"))
        assert admit(hdrs, request("initialize", INIT_PARAMS)).version == "2025-06-18"

    def test_initialize_with_the_modern_header_and_meta_is_a_removed_method(self) -> None:
        # Conformance: initialize with a 2026 header and valid _meta must get 404 -32601.
        body = modern_body("initialize", **INIT_PARAMS)
        hdrs = headers(("MCP-Protocol-Version", "2026-07-28"), ("Mcp-Method", "initialize"))
        with pytest.raises(MethodNotFound) as caught:
            classify(hdrs, body, lookup())
        assert caught.value.status_for() == 404
        assert caught.value.era == "modern"

    @pytest.mark.row("invalid_params")
    @pytest.mark.parametrize(
        "params",
        [
            None,
            {},
            {**INIT_PARAMS, "protocolVersion": 20250618},
            {k: v for k, v in INIT_PARAMS.items() if k != "protocolVersion"},
            {k: v for k, v in INIT_PARAMS.items() if k != "capabilities"},
            {**INIT_PARAMS, "capabilities": []},
            {k: v for k, v in INIT_PARAMS.items() if k != "clientInfo"},
            {**INIT_PARAMS, "clientInfo": "codex"},
            {**INIT_PARAMS, "clientInfo": {"name": "codex"}},
            {**INIT_PARAMS, "clientInfo": {"version": "1"}},
            {**INIT_PARAMS, "clientInfo": {"name": 1, "version": "1"}},
            {**INIT_PARAMS, "_meta": []},
        ],
        ids=[
            "no params",
            "empty params",
            "version integer",
            "version missing",
            "capabilities missing",
            "capabilities array",
            "clientInfo missing",
            "clientInfo string",
            "clientInfo without version",
            "clientInfo without name",
            "clientInfo name integer",
            "_meta array",
        ],
    )
    def test_malformed_initialize_params_are_invalid_params_answered_200(self, params: Any) -> None:
        error = refuse(InvalidParams, NO_HEADERS, request("initialize", params))
        assert error.status_for() == 200
        assert error.jsonrpc_code == -32602

    @pytest.mark.row("invalid_request")
    def test_initialize_without_an_id_is_invalid_request(self) -> None:
        body = request("initialize", INIT_PARAMS, id="<none>")
        error = refuse(InvalidRequest, NO_HEADERS, body, request_id=None)
        assert error.status_for() == 400


class TestOperation:
    def test_initialized_notification_is_admitted_as_a_notification(self) -> None:
        message = admit(
            version_header("2025-06-18"), request("notifications/initialized", id="<none>")
        )
        assert message.is_notification
        assert message.era == "legacy"

    @pytest.mark.parametrize("version", LEGACY)
    def test_a_supported_legacy_header_is_the_version_served(self, version: str) -> None:
        message = admit(version_header(version), request("tools/list", {"cursor": "c"}))
        assert (message.era, message.version, message.cursor) == ("legacy", version, "c")

    def test_without_a_header_version_2025_03_26_is_assumed(self) -> None:
        assert admit(NO_HEADERS, request("tools/list")).version == "2025-03-26"

    def test_ping_is_answered_on_the_legacy_profile(self) -> None:
        assert admit(version_header("2025-11-25"), request("ping", id="123")).method == "ping"

    def test_tools_call_carries_name_arguments_and_progress_token(self) -> None:
        params = {"name": "t", "arguments": {"a": 1}, "_meta": {"progressToken": 5}}
        message = admit(version_header("2025-06-18"), request("tools/call", params))
        assert (message.tool_name, dict(message.arguments), message.progress_token) == (
            "t",
            {"a": 1},
            5,
        )

    def test_mirrored_headers_are_not_compared_on_the_legacy_profile(self) -> None:
        hdrs = headers(
            ("MCP-Protocol-Version", "2025-06-18"),
            ("Mcp-Method", "something/else"),
            ("Mcp-Name", "other"),
            ("Mcp-Session-Id", "abc"),
        )
        assert admit(hdrs, request("tools/call", {"name": "t"})).tool_name == "t"

    @pytest.mark.row("method_not_found")
    @pytest.mark.parametrize(
        "method", ["server/discover", "subscriptions/listen", "logging/setLevel", "x"]
    )
    def test_an_unserved_method_is_minus_32601_answered_200(self, method: str) -> None:
        error = refuse(MethodNotFound, version_header("2025-06-18"), request(method, {}))
        assert error.status_for() == 200
        assert error.jsonrpc_code == -32601

    @pytest.mark.row("invalid_params")
    @pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
    @pytest.mark.parametrize("uri", [None, 7, "", "x" * 2049])
    def test_a_subscription_names_its_uri_as_a_read_does(self, method: str, uri: Any) -> None:
        params = {} if uri is None else {"uri": uri}
        error = refuse(InvalidParams, version_header("2025-06-18"), request(method, params))
        assert error.status_for() == 200 and error.jsonrpc_code == -32602
        assert admit(version_header("2025-11-25"), request(method, {"uri": "a://b"})).uri == "a://b"

    @pytest.mark.row("invalid_params")
    @pytest.mark.parametrize(
        ("method", "params"),
        [
            ("tools/call", {}),
            ("tools/call", {"name": None}),
            ("tools/call", {"name": "t", "arguments": [1]}),
            ("tools/call", {"name": "t", "_meta": {"progressToken": False}}),
            ("tools/list", {"cursor": 1}),
        ],
        ids=["name missing", "name null", "arguments array", "progressToken bool", "cursor int"],
    )
    def test_malformed_params_are_invalid_params_answered_200(
        self, method: str, params: dict[str, Any]
    ) -> None:
        error = refuse(InvalidParams, NO_HEADERS, request(method, params))
        assert error.status_for() == 200

    @pytest.mark.row("unsupported_version")
    def test_an_unsupported_legacy_header_is_400_minus_32022(self) -> None:
        with pytest.raises(UnsupportedProtocolVersion) as caught:
            classify(version_header("2024-11-05"), request("tools/list"), lookup())
        assert caught.value.status_for() == 400
        assert caught.value.data == {"supported": ["2026-07-28"], "requested": "2024-11-05"}

    @pytest.mark.row("invalid_request")
    def test_a_posted_response_is_invalid_request(self) -> None:
        body = {"jsonrpc": "2.0", "id": 4, "result": {}}
        error = refuse(InvalidRequest, version_header("2025-06-18"), body, request_id=4)
        assert error.status_for() == 400


class TestBatches:
    @pytest.mark.parametrize("hdrs", [NO_HEADERS, version_header("2025-03-26")])
    def test_a_2025_03_26_batch_is_admitted_member_by_member(self, hdrs: CIMultiDict[str]) -> None:
        batch = [
            request("tools/list", id=1),
            request("notifications/progress", {"progressToken": 1}, id="<none>"),
            request("tools/call", {"name": "t"}, id="1"),
        ]
        result = classify(hdrs, batch, lookup())
        assert isinstance(result, tuple)
        assert [(m.method, m.id, m.version) for m in result] == [
            ("tools/list", 1, "2025-03-26"),
            ("notifications/progress", None, "2025-03-26"),
            ("tools/call", "1", "2025-03-26"),
        ]
        assert all(m.rejection is None for m in result)

    def test_a_batch_of_the_maximum_size_is_admitted(self) -> None:
        batch = [request("ping", id=i) for i in range(MAX_BATCH)]
        result = classify(NO_HEADERS, batch, lookup())
        assert isinstance(result, tuple)
        assert len(result) == MAX_BATCH

    @pytest.mark.row("invalid_request")
    @pytest.mark.parametrize(
        "batch",
        [
            [],
            [request("ping", id=i) for i in range(MAX_BATCH + 1)],
            [request("ping", id=1), request("initialize", INIT_PARAMS, id=2)],
            [request("ping", id=1), request("tools/list", id=1)],
            [request("ping", id=1), {"jsonrpc": "2.0", "id": 2, "result": {}}],
            [request("ping", id=1), 5],
            [request("ping", id=1), [request("ping", id=2)]],
            [request("ping", id=1), request("ping", id=1.0)],
            [request("ping", id=1), request("tools/list", id="<none>")],
        ],
        ids=[
            "empty",
            "one past the maximum",
            "initialize inside",
            "duplicate id",
            "posted response",
            "scalar member",
            "nested batch",
            "float id",
            "request without id",
        ],
    )
    def test_a_malformed_batch_is_refused_whole_with_id_null(self, batch: list[Any]) -> None:
        error = refuse(InvalidRequest, NO_HEADERS, batch, request_id=None)
        assert error.jsonrpc_code == -32600
        assert error.status_for() == 400

    @pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
    def test_a_batch_after_2025_03_26_is_invalid_request(self, version: str) -> None:
        refuse(InvalidRequest, version_header(version), [request("ping")], request_id=None)

    def test_a_batch_on_the_modern_path_is_invalid_request(self) -> None:
        with pytest.raises(InvalidRequest) as caught:
            classify(version_header("2026-07-28"), [request("ping")], lookup())
        assert caught.value.era == "modern"

    def test_a_member_failing_a_later_check_carries_its_own_rejection(self) -> None:
        batch = [
            request("ping", id=1),
            request("logging/setLevel", id=2),
            request("tools/call", {"name": 3}, id=3),
        ]
        result = classify(NO_HEADERS, batch, lookup())
        assert isinstance(result, tuple)
        assert result[0].rejection is None
        assert isinstance(result[1].rejection, MethodNotFound)
        assert result[1].rejection.request_id == 2
        assert result[1].rejection.status_for() == 200
        assert isinstance(result[2].rejection, InvalidParams)
        assert result[2].rejection.request_id == 3


class TestVersionLists:
    def test_only_handshake_revisions_are_legacy(self) -> None:
        assert all(is_legacy(version) for version in LEGACY)
        assert not is_legacy(MODERN)
        assert not is_legacy("2024-11-05")

    def test_legacy_versions_are_listed_newest_first(self) -> None:
        assert list(LEGACY) == sorted(LEGACY, reverse=True)

    def test_discover_and_minus_32022_advertise_only_the_modern_revision(self) -> None:
        assert SUPPORTED == (MODERN,)
