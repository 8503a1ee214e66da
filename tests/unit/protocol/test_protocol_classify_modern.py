"""Version routing and the 2026-07-28 validation ladder (digest §1.5, §2.5), step by step."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import CIMultiDict

from gateway.errors import (
    GatewayError,
    HeaderMismatch,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    UnsupportedProtocolVersion,
)
from gateway.protocol.classify import classify
from gateway.protocol.messages import McpMessage
from gateway.protocol.versions import MODERN, SUPPORTED
from gateway.seams import ToolDef
from tests.support.protocol import (
    META_CAPS,
    META_VERSION,
    headers,
    lookup,
    modern_body,
    modern_headers,
    request,
)


def admit(hdrs: CIMultiDict[str], body: Any, tools: tuple[ToolDef, ...] = ()) -> McpMessage:
    result = classify(hdrs, body, lookup(tools))
    assert isinstance(result, McpMessage)
    return result


def refuse(
    cls: type[GatewayError],
    hdrs: CIMultiDict[str],
    body: Any,
    *,
    request_id: Any = 1,
    tools: tuple[ToolDef, ...] = (),
) -> GatewayError:
    with pytest.raises(GatewayError) as caught:
        classify(hdrs, body, lookup(tools))
    error = caught.value
    assert type(error) is cls, f"{type(error).__name__}: {error.detail}"
    assert error.request_id == request_id
    assert error.era == "modern"
    return error


CALL = modern_body("tools/call", name="get_weather", arguments={"location": "Seattle"})


class TestAdmittedRequests:
    def test_server_discover_is_admitted_with_the_client_capabilities(self) -> None:
        body = modern_body("server/discover", id="d-1", capabilities={"sampling": {}})
        message = admit(modern_headers("server/discover"), body)
        assert (message.era, message.version, message.id) == ("modern", MODERN, "d-1")
        assert message.method == "server/discover"
        assert message.client_capabilities == {"sampling": {}}
        assert not message.is_notification

    def test_tools_list_carries_the_cursor(self) -> None:
        message = admit(modern_headers("tools/list"), modern_body("tools/list", cursor="abc"))
        assert message.cursor == "abc"

    def test_tools_call_carries_name_arguments_and_progress_token(self) -> None:
        body = modern_body("tools/call", id=7, name="get_weather", arguments={"location": "X"})
        body["params"]["_meta"]["progressToken"] = "p-1"
        message = admit(modern_headers("tools/call", "get_weather"), body)
        assert message.tool_name == "get_weather"
        assert message.arguments == {"location": "X"}
        assert message.progress_token == "p-1"
        assert message.header_params == {}

    def test_client_info_is_optional(self) -> None:
        admit(modern_headers("tools/list"), modern_body("tools/list"))

    def test_a_session_id_header_is_ignored(self) -> None:
        hdrs = modern_headers("tools/list")
        hdrs.add("Mcp-Session-Id", "stale-session")
        admit(hdrs, modern_body("tools/list"))

    def test_header_names_are_case_insensitive_and_values_ows_trimmed(self) -> None:
        hdrs = headers(
            ("mcp-protocol-version", f" {MODERN}\t"),
            ("MCP-METHOD", " tools/call "),
            ("mcp-name", "  get_weather  "),
        )
        assert admit(hdrs, CALL).tool_name == "get_weather"

    @pytest.mark.parametrize(
        "method", ["notifications/initialized", "notifications/cancelled", "notifications/x"]
    )
    def test_a_notification_is_accepted_without_mirrored_headers(self, method: str) -> None:
        body = request(method, {"requestId": 1}, id="<none>")
        message = admit(headers(("MCP-Protocol-Version", MODERN)), body)
        assert message.is_notification
        assert (message.era, message.method, message.id) == ("modern", method, None)


class TestRouting:
    @pytest.mark.row("header_mismatch")
    @pytest.mark.parametrize("name", ["MCP-Protocol-Version", "Mcp-Method", "Mcp-Name"])
    def test_a_duplicated_routing_header_is_a_mismatch(self, name: str) -> None:
        hdrs = modern_headers("tools/call", "get_weather")
        hdrs.add(name, hdrs[name])
        error = refuse(HeaderMismatch, hdrs, CALL)
        assert error.status_for() == 400
        assert error.jsonrpc_code == -32020

    def test_a_modern_body_without_the_version_header_is_a_mismatch(self) -> None:
        hdrs = headers(("Mcp-Method", "tools/list"))
        refuse(HeaderMismatch, hdrs, modern_body("tools/list"))

    @pytest.mark.row("unsupported_version")
    @pytest.mark.parametrize("version", ["v999.0.0", "2099-01-01", "2024-11-05", "", "2026-07-28x"])
    def test_an_unknown_version_without_modern_meta_is_unsupported(self, version: str) -> None:
        hdrs = headers(("MCP-Protocol-Version", version))
        error = refuse(UnsupportedProtocolVersion, hdrs, request("tools/list", {}))
        assert error.status_for() == 400
        assert error.jsonrpc_code == -32022
        assert error.data == {"supported": list(SUPPORTED), "requested": version}

    def test_an_unknown_version_in_header_and_meta_is_unsupported(self) -> None:
        body = modern_body("tools/list", version="v999.0.0")
        error = refuse(
            UnsupportedProtocolVersion, modern_headers("tools/list", version="v999.0.0"), body
        )
        assert error.data == {"supported": ["2026-07-28"], "requested": "v999.0.0"}

    @pytest.mark.parametrize(
        ("header", "meta"),
        [(MODERN, "v999.0.0"), ("v999.0.0", MODERN), (MODERN, "2025-06-18")],
        ids=["modern header, unknown meta", "unknown header, modern meta", "legacy meta"],
    )
    def test_header_and_meta_disagreeing_is_a_mismatch_before_unsupported(
        self, header: str, meta: str
    ) -> None:
        body = modern_body("tools/list", version=meta)
        refuse(HeaderMismatch, modern_headers("tools/list", version=header), body)

    def test_an_unsupported_notification_gets_minus_32022(self) -> None:
        body = request("notifications/initialized", id="<none>")
        error = refuse(
            UnsupportedProtocolVersion,
            headers(("MCP-Protocol-Version", "v2")),
            body,
            request_id=None,
        )
        assert error.data == {"supported": list(SUPPORTED), "requested": "v2"}


@pytest.mark.row("invalid_request")
class TestEnvelope:
    @pytest.mark.parametrize(
        ("body", "request_id"),
        [
            ([modern_body("tools/list")], None),
            ([], None),
            ("tools/list", None),
            (42, None),
            (None, None),
            ({"jsonrpc": "2.0", "id": 1, "result": {}}, 1),
            ({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}}, 1),
            ({**modern_body("tools/list"), "jsonrpc": "1.0"}, 1),
            ({k: v for k, v in modern_body("tools/list").items() if k != "jsonrpc"}, 1),
            ({**modern_body("tools/list"), "extra": True}, 1),
            ({k: v for k, v in modern_body("tools/list").items() if k != "method"}, 1),
            ({**modern_body("tools/list"), "method": ""}, 1),
            ({**modern_body("tools/list"), "method": ["tools/list"]}, 1),
            ({**modern_body("tools/list"), "params": []}, 1),
            ({**modern_body("tools/list"), "params": "x"}, 1),
            ({**modern_body("tools/list"), "params": None}, 1),
            (request("tools/list", {}, id="<none>"), None),
        ],
        ids=[
            "batch array",
            "empty array",
            "string",
            "number",
            "null",
            "posted result",
            "posted error",
            "jsonrpc 1.0",
            "jsonrpc missing",
            "unknown member",
            "method missing",
            "method empty",
            "method not a string",
            "params array",
            "params string",
            "params null",
            "request without id",
        ],
    )
    def test_a_malformed_envelope_is_invalid_request(self, body: Any, request_id: Any) -> None:
        error = refuse(InvalidRequest, modern_headers("tools/list"), body, request_id=request_id)
        assert error.status_for() == 400
        assert error.jsonrpc_code == -32600


class TestIds:
    @pytest.mark.parametrize(
        "request_id",
        [2**53 - 1, -(2**53 - 1), 0, "", "x" * 128, "é" * 64, "😀" * 32],
        ids=[
            "2^53-1",
            "-(2^53-1)",
            "zero",
            "empty string",
            "128 ASCII bytes",
            "128 bytes of 2-byte chars",
            "128 bytes of 4-byte chars",
        ],
    )
    def test_an_id_within_bounds_is_admitted(self, request_id: Any) -> None:
        message = admit(modern_headers("tools/list"), modern_body("tools/list", id=request_id))
        assert message.id == request_id
        assert type(message.id) is type(request_id)

    @pytest.mark.row("invalid_request")
    @pytest.mark.parametrize(
        "request_id",
        [2**53, -(2**53), 1.0, 1e3, 1.5, True, False, None, "x" * 129, "é" * 64 + "x", [1], {}],
        ids=[
            "2^53",
            "-(2^53)",
            "1.0",
            "1e3",
            "1.5",
            "true",
            "false",
            "null",
            "129 ASCII bytes",
            "129 UTF-8 bytes",
            "array",
            "object",
        ],
    )
    def test_an_id_out_of_bounds_is_invalid_request_with_id_null(self, request_id: Any) -> None:
        body = modern_body("tools/list", id=request_id)
        error = refuse(InvalidRequest, modern_headers("tools/list"), body, request_id=None)
        assert error.jsonrpc_code == -32600


@pytest.mark.row("invalid_params")
class TestRequiredMeta:
    @pytest.mark.parametrize(
        "params",
        [
            None,
            {},
            {"_meta": None},
            {"_meta": []},
            {"_meta": {META_CAPS: {}}},
            {"_meta": {META_VERSION: MODERN}},
            {"_meta": {META_VERSION: MODERN, META_CAPS: None}},
            {"_meta": {META_VERSION: MODERN, META_CAPS: []}},
            {"_meta": {META_VERSION: MODERN, META_CAPS: "all"}},
            {"_meta": {META_VERSION: 20260728, META_CAPS: {}}},
            {"_meta": {META_VERSION: None, META_CAPS: {}}},
        ],
        ids=[
            "no params",
            "no _meta",
            "_meta null",
            "_meta array",
            "protocolVersion missing",
            "clientCapabilities missing",
            "clientCapabilities null",
            "clientCapabilities array",
            "clientCapabilities string",
            "protocolVersion integer",
            "protocolVersion null",
        ],
    )
    def test_missing_or_malformed_meta_is_invalid_params_400(self, params: Any) -> None:
        body = request("server/discover", params)
        error = refuse(InvalidParams, modern_headers("server/discover"), body)
        assert error.status_for() == 400
        assert error.jsonrpc_code == -32602

    def test_meta_is_checked_before_the_headers(self) -> None:
        refuse(InvalidParams, headers(("MCP-Protocol-Version", MODERN)), request("tools/list", {}))


@pytest.mark.row("header_mismatch")
class TestMirroredHeaders:
    @pytest.mark.parametrize(
        "hdrs",
        [
            headers(("MCP-Protocol-Version", MODERN)),
            modern_headers("TOOLS/CALL", "get_weather"),
            modern_headers("tools/list", "get_weather"),
            modern_headers("tools/call"),
            modern_headers("tools/call", "GET_WEATHER"),
            modern_headers("tools/call", "other"),
            modern_headers("tools/call", "get_weather", version="2026-07-28 x"),
            modern_headers("tools/call", "get_wéather"),
            modern_headers("tools/call", "=?base64?Z2V0X3dlYXRoZXI?="),
            modern_headers("tools/call", "=?base64?b3RoZXI=?="),
            modern_headers("tools/call", "=?base64?Z2V0X3dlYXRoZXJ=?="),
            modern_headers("tools/call", "=?base64?Z2V0X3dlYXRo*XI=?="),
            modern_headers("tools/call", "=?BASE64?Z2V0X3dlYXRoZXI=?="),
            modern_headers("tools/call", "=?base64?IGdldF93ZWF0aGVyIA==?="),
        ],
        ids=[
            "Mcp-Method missing",
            "Mcp-Method other case",
            "Mcp-Method other method",
            "Mcp-Name missing",
            "Mcp-Name other case",
            "Mcp-Name other tool",
            "version header differs",
            "non-ASCII plain value",
            "base64 without padding",
            "base64 of another name",
            "base64 non-canonical padding bits",
            "base64 non-alphabet",
            "uppercase prefix",
            "base64 payload with spaces",
        ],
    )
    def test_a_missing_or_different_header_is_a_mismatch(self, hdrs: CIMultiDict[str]) -> None:
        error = refuse(HeaderMismatch, hdrs, CALL)
        assert error.status_for() == 400
        assert error.jsonrpc_code == -32020

    @pytest.mark.parametrize(
        ("header", "name"),
        [
            ("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"),
            ("=?base64?IHBhZGRlZCA=?=", " padded "),
            ("=?base64?Z2V0X3dlYXRoZXI=?=", "get_weather"),
            ("  get_weather  ", "get_weather"),
            ("\tget weather\t", "get weather"),
            ("=?base64?PT9iYXNlNjQ/eD89?=", "=?base64?x?="),
        ],
        ids=[
            "spec example non-ASCII",
            "spec example padded",
            "wrapped ASCII",
            "plain padded with spaces",
            "plain with inner space",
            "wrapped look-alike",
        ],
    )
    def test_mcp_name_is_decoded_before_comparing(self, header: str, name: str) -> None:
        body = modern_body("tools/call", name=name)
        assert admit(modern_headers("tools/call", header), body).tool_name == name

    def test_a_plain_value_that_looks_wrapped_but_is_not_base64_is_a_mismatch(self) -> None:
        body = modern_body("tools/call", name="=?base64?x?=")
        refuse(HeaderMismatch, modern_headers("tools/call", "=?base64?x?="), body)

    def test_a_base64_payload_that_is_not_utf8_is_a_mismatch(self) -> None:
        refuse(HeaderMismatch, modern_headers("tools/call", "=?base64?/w==?="), CALL)

    def test_a_non_string_tool_name_never_matches(self) -> None:
        body = modern_body("tools/call", name=5)
        refuse(HeaderMismatch, modern_headers("tools/call", "5"), body)

    @pytest.mark.parametrize(
        ("method", "member"), [("prompts/get", "name"), ("resources/read", "uri")]
    )
    def test_other_named_methods_are_checked_before_method_dispatch(
        self, method: str, member: str
    ) -> None:
        body = modern_body(method, **{member: "a"})
        refuse(HeaderMismatch, modern_headers(method, "b"), body)
        admitted = classify(modern_headers(method, "a"), body, lookup())
        assert isinstance(admitted, McpMessage) and admitted.method == method


@pytest.mark.row("method_not_found")
class TestMethods:
    @pytest.mark.parametrize(
        "method",
        [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
            "resources/unsubscribe",
            "unknown/method",
            "notifications/initialized",
        ],
    )
    def test_a_removed_or_unknown_method_is_404_minus_32601(self, method: str) -> None:
        error = refuse(
            MethodNotFound, modern_headers(method), modern_body(method, id=9), request_id=9
        )
        assert error.status_for() == 404
        assert error.jsonrpc_code == -32601


@pytest.mark.row("invalid_params")
class TestMethodParams:
    @pytest.mark.parametrize(
        ("method", "params", "meta"),
        [
            ("tools/call", {"name": "t", "arguments": []}, {}),
            ("tools/call", {"name": "t", "arguments": "x"}, {}),
            ("tools/call", {"name": "t"}, {"progressToken": True}),
            ("tools/call", {"name": "t"}, {"progressToken": 1.5}),
            ("tools/call", {"name": "t"}, {"progressToken": "p" * 129}),
            ("tools/call", {"name": "t"}, {"progressToken": {}}),
            ("tools/list", {"cursor": 3}, {}),
            ("tools/list", {"cursor": {}}, {}),
            ("tools/list", {}, {"io.modelcontextprotocol/logLevel": "verbose"}),
        ],
        ids=[
            "arguments array",
            "arguments string",
            "progressToken bool",
            "progressToken float",
            "progressToken too long",
            "progressToken object",
            "cursor integer",
            "cursor object",
            "unknown logLevel",
        ],
    )
    def test_malformed_method_params_are_invalid_params(
        self, method: str, params: dict[str, Any], meta: dict[str, Any]
    ) -> None:
        body = modern_body(method, **params)
        body["params"]["_meta"].update(meta)
        hdrs = modern_headers(method, params.get("name"))
        error = refuse(InvalidParams, hdrs, body)
        assert error.status_for() == 400

    def test_null_arguments_and_cursor_mean_absent(self) -> None:
        call = admit(
            modern_headers("tools/call", "t"), modern_body("tools/call", name="t", arguments=None)
        )
        assert call.arguments == {}
        listing = admit(modern_headers("tools/list"), modern_body("tools/list", cursor=None))
        assert listing.cursor is None

    @pytest.mark.parametrize("token", [0, 2**53 - 1, "tok", ""])
    def test_a_progress_token_may_be_a_string_or_safe_integer(self, token: Any) -> None:
        body = modern_body("tools/call", name="t")
        body["params"]["_meta"]["progressToken"] = token
        assert admit(modern_headers("tools/call", "t"), body).progress_token == token

    def test_a_known_log_level_is_accepted(self) -> None:
        body = modern_body("tools/list")
        body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = "warning"
        admit(modern_headers("tools/list"), body)
