"""Result builders and envelopes validate against the official schema of each revision."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from gateway import __version__
from gateway.config import ServerInfo
from gateway.errors import InternalError, InvalidParams
from gateway.protocol.cursor import decode_cursor, encode_cursor
from gateway.protocol.envelope import error_body, success_body
from gateway.protocol.results import (
    ListPage,
    discover_result,
    initialize_result,
    ping_result,
    shape_call_result,
    tool_error_result,
    tools_list_result,
)
from gateway.protocol.versions import LEGACY, MODERN, SUPPORTED
from gateway.seams import ToolDef
from tests.support.schemas import validate_response

SERVER = ServerInfo(name="acme-gateway", title="Acme tools")
SERVER_INFO = {"name": "acme-gateway", "version": __version__, "title": "Acme tools"}
META = "io.modelcontextprotocol/serverInfo"


def envelope(result: dict[str, Any], request_id: Any = 1) -> Any:
    return json.loads(success_body(request_id, result))


def make_tool(name: str, **extra: Any) -> ToolDef:
    definition = {"name": name, "inputSchema": {"type": "object"}, **extra}
    return ToolDef(name=name, definition=definition)


CATALOG = [make_tool(f"tool_{letter}") for letter in "edcba"]


class TestDiscover:
    def test_discover_advertises_versions_capabilities_and_caching_hints(self) -> None:
        result = discover_result(server=SERVER, has_tools=True, ttl_ms=3_600_000, instructions="Hi")
        validate_response(MODERN, envelope(result), "server/discover")
        assert result == {
            "resultType": "complete",
            "supportedVersions": list(SUPPORTED),
            "capabilities": {"tools": {"listChanged": False}},
            "instructions": "Hi",
            "ttlMs": 3_600_000,
            "cacheScope": "private",
            "_meta": {META: SERVER_INFO},
        }

    def test_without_visible_tools_no_tools_capability_is_declared(self) -> None:
        result = discover_result(server=ServerInfo(), has_tools=False, ttl_ms=0, instructions=None)
        validate_response(MODERN, envelope(result), "server/discover")
        assert result["capabilities"] == {}
        assert "instructions" not in result
        assert result["_meta"][META] == {"name": "mcp-resource-gateway", "version": __version__}


class TestToolsList:
    def test_a_modern_list_is_ordered_by_name_with_caching_hints(self) -> None:
        result = tools_list_result(
            CATALOG,
            ListPage(cursor=None, page_size=100, ttl_ms=60_000, era="modern", server=SERVER),
        )
        validate_response(MODERN, envelope(result), "tools/list")
        assert [tool["name"] for tool in result["tools"]] == sorted(t.name for t in CATALOG)
        assert (result["ttlMs"], result["cacheScope"]) == (60_000, "private")
        assert result["_meta"] == {META: SERVER_INFO}
        assert "nextCursor" not in result

    @pytest.mark.parametrize("era", ["modern", "legacy"])
    def test_pages_follow_cursors_until_the_last_tool(self, era: Any) -> None:
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            result = tools_list_result(
                CATALOG, ListPage(cursor=cursor, page_size=2, ttl_ms=1, era=era, server=SERVER)
            )
            pages += 1
            seen.extend(tool["name"] for tool in result["tools"])
            cursor = result.get("nextCursor")
            if cursor is None:
                break
        assert seen == sorted(t.name for t in CATALOG)
        assert pages == 3

    def test_a_page_exactly_full_has_no_next_cursor(self) -> None:
        result = tools_list_result(
            CATALOG, ListPage(cursor=None, page_size=5, ttl_ms=1, era="modern", server=SERVER)
        )
        assert "nextCursor" not in result
        result = tools_list_result(
            CATALOG, ListPage(cursor=None, page_size=4, ttl_ms=1, era="modern", server=SERVER)
        )
        assert result["nextCursor"] == encode_cursor("tool_d")

    def test_a_cursor_survives_the_tool_it_names_disappearing(self) -> None:
        cursor = encode_cursor("tool_b")
        remaining = [tool for tool in CATALOG if tool.name != "tool_b"]
        result = tools_list_result(
            remaining, ListPage(cursor=cursor, page_size=10, ttl_ms=1, era="modern", server=SERVER)
        )
        assert [tool["name"] for tool in result["tools"]] == ["tool_c", "tool_d", "tool_e"]

    def test_an_empty_cursor_starts_at_the_beginning(self) -> None:
        result = tools_list_result(
            CATALOG, ListPage(cursor="", page_size=1, ttl_ms=1, era="modern", server=SERVER)
        )
        assert [tool["name"] for tool in result["tools"]] == ["tool_a"]

    @pytest.mark.row("invalid_params")
    @pytest.mark.parametrize(
        "cursor",
        [
            "not a cursor",
            "MTp0b29sX2E=",
            "bTp0b29sX2E",
            "x" * 2000,
            "MTr_",
            "AA",
            "-_-_",
            "MTp0b29sX2F",
            "MTp0b",
        ],
        ids=[
            "garbage",
            "padded",
            "wrong tag",
            "too long",
            "invalid UTF-8",
            "short",
            "random bytes",
            "non-canonical trailing bits",
            "impossible length",
        ],
    )
    def test_a_cursor_we_did_not_issue_is_invalid_params(self, cursor: str) -> None:
        with pytest.raises(InvalidParams) as caught:
            tools_list_result(
                CATALOG,
                ListPage(
                    cursor=cursor,
                    page_size=2,
                    ttl_ms=1,
                    era="legacy",
                    server=SERVER,
                    request_id="r-1",
                ),
            )
        assert (caught.value.request_id, caught.value.era) == ("r-1", "legacy")
        assert caught.value.status_for() == 200
        assert caught.value.jsonrpc_code == -32602

    @pytest.mark.parametrize("revision", LEGACY)
    def test_a_legacy_list_omits_2026_fields_and_fits_the_legacy_schema(
        self, revision: str
    ) -> None:
        tools = [
            make_tool("array_out", outputSchema={"type": "array"}),
            make_tool("object_out", outputSchema={"type": "object", "properties": {}}),
            make_tool(
                "bool_props",
                inputSchema={"type": "object", "properties": {"a": True, "b": False, "c": 5}},
            ),
            ToolDef(name="no_schema", definition={"name": "no_schema"}),
        ]
        result = tools_list_result(
            tools, ListPage(cursor=None, page_size=10, ttl_ms=1, era="legacy", server=SERVER)
        )
        validate_response(revision, envelope(result), "tools/list")
        assert set(result) == {"tools"}
        by_name = {tool["name"]: tool for tool in result["tools"]}
        assert "outputSchema" not in by_name["array_out"]
        assert by_name["object_out"]["outputSchema"]["type"] == "object"
        assert by_name["bool_props"]["inputSchema"]["properties"] == {
            "a": {},
            "b": {"not": {}},
            "c": {},
        }
        assert by_name["no_schema"]["inputSchema"] == {"type": "object"}

    def test_the_advertised_name_is_the_gateway_name(self) -> None:
        prefixed = ToolDef(
            name="acme.search",
            definition={"name": "search", "inputSchema": {"type": "object"}},
            upstream_name="search",
        )
        result = tools_list_result(
            [prefixed], ListPage(cursor=None, page_size=1, ttl_ms=1, era="modern", server=SERVER)
        )
        assert result["tools"][0]["name"] == "acme.search"


class TestInitializeAndPing:
    @pytest.mark.parametrize("revision", LEGACY)
    def test_initialize_echoes_a_supported_version(self, revision: str) -> None:
        result = initialize_result(revision, server=SERVER, instructions="Use the tools.")
        validate_response(revision, envelope(result), "initialize")
        assert result == {
            "protocolVersion": revision,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO,
            "instructions": "Use the tools.",
        }

    def test_initialize_counter_offers_the_newest_legacy_version(self) -> None:
        result = initialize_result("2026-07-28", server=SERVER, instructions=None)
        assert result["protocolVersion"] == LEGACY[0]
        assert "instructions" not in result
        validate_response(LEGACY[0], envelope(result), "initialize")

    @pytest.mark.parametrize("revision", LEGACY)
    def test_ping_is_an_empty_result(self, revision: str) -> None:
        assert ping_result() == {}
        validate_response(revision, envelope(ping_result(), "123"), "ping")


class TestCallResults:
    BACKEND: ClassVar[dict[str, Any]] = {
        "content": [{"type": "text", "text": "14°C"}],
        "structuredContent": {"celsius": 14},
        "isError": False,
        "_meta": {"com.example/trace": "t"},
    }

    def test_a_modern_call_result_gets_result_type_and_server_info(self) -> None:
        shaped = shape_call_result(self.BACKEND, era="modern", server=SERVER)
        validate_response(MODERN, envelope(shaped), "tools/call")
        assert shaped["resultType"] == "complete"
        assert shaped["_meta"] == {"com.example/trace": "t", META: SERVER_INFO}
        assert shaped["content"] == self.BACKEND["content"]
        assert self.BACKEND["_meta"] == {"com.example/trace": "t"}  # input untouched

    @pytest.mark.parametrize("structured", [[1, 2], "text", 3, None])
    def test_modern_keeps_any_structured_content(self, structured: Any) -> None:
        shaped = shape_call_result(
            {**self.BACKEND, "structuredContent": structured}, era="modern", server=SERVER
        )
        validate_response(MODERN, envelope(shaped), "tools/call")
        assert shaped["structuredContent"] == structured

    @pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25"])
    @pytest.mark.parametrize("structured", [[1, 2], "text", 3])
    def test_legacy_drops_non_object_structured_content(
        self, revision: str, structured: Any
    ) -> None:
        backend = {
            **self.BACKEND,
            "structuredContent": structured,
            "resultType": "complete",
            "ttlMs": 5,
            "cacheScope": "public",
        }
        shaped = shape_call_result(backend, era="legacy", server=SERVER)
        validate_response(revision, envelope(shaped), "tools/call")
        assert set(shaped) == {"content", "isError", "_meta"}
        assert shaped["_meta"] == {"com.example/trace": "t"}

    def test_legacy_drops_a_non_object_meta(self) -> None:
        shaped = shape_call_result({**self.BACKEND, "_meta": "x"}, era="legacy", server=SERVER)
        assert "_meta" not in shaped
        validate_response("2025-06-18", envelope(shaped), "tools/call")

    @pytest.mark.parametrize("revision", LEGACY)
    def test_legacy_keeps_object_structured_content(self, revision: str) -> None:
        shaped = shape_call_result(self.BACKEND, era="legacy", server=SERVER)
        validate_response(revision, envelope(shaped), "tools/call")
        assert shaped["structuredContent"] == {"celsius": 14}

    @pytest.mark.parametrize("era", ["modern", "legacy"])
    def test_a_result_without_content_gets_an_empty_list(self, era: Any) -> None:
        shaped = shape_call_result({"isError": True}, era=era, server=SERVER)
        assert shaped["content"] == []

    @pytest.mark.parametrize(
        ("era", "revision"), [("modern", MODERN), *(("legacy", r) for r in LEGACY)]
    )
    def test_a_tool_error_result_is_readable_by_the_model(self, era: Any, revision: str) -> None:
        shaped = shape_call_result(tool_error_result("Backend timed out"), era=era, server=SERVER)
        validate_response(revision, envelope(shaped), "tools/call")
        assert shaped["isError"] is True
        assert shaped["content"] == [{"type": "text", "text": "Backend timed out"}]


class TestEnvelopes:
    def test_bodies_are_compact_utf8(self) -> None:
        body = success_body("é-1", {"text": "世界"})
        assert body == '{"jsonrpc":"2.0","id":"é-1","result":{"text":"世界"}}'.encode()

    def test_an_unknown_id_is_written_as_null(self) -> None:
        body = error_body(None, -32700, "Parse error")
        assert (
            body == b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'
        )
        validate_response(MODERN, json.loads(body))

    def test_an_unsupported_version_error_fits_the_schema(self) -> None:
        data = {"supported": list(SUPPORTED), "requested": "v999.0.0"}
        body = json.loads(error_body(301, -32022, "Unsupported protocol version", data))
        validate_response(MODERN, body)
        assert body["error"]["data"] == data

    @pytest.mark.parametrize("revision", LEGACY)
    def test_legacy_error_bodies_fit_the_schema(self, revision: str) -> None:
        validate_response(revision, json.loads(error_body(5, -32601, "Method not found")))

    def test_a_lone_surrogate_from_upstream_is_escaped_not_fatal(self) -> None:
        body = success_body(1, {"text": "a\ud800b"})
        assert body.decode("utf-8") == '{"jsonrpc":"2.0","id":1,"result":{"text":"a\\ud800b"}}'

    @pytest.mark.parametrize("bad", [float("nan"), float("inf"), object()])
    def test_an_unserialisable_result_is_an_internal_error_with_the_id(self, bad: Any) -> None:
        with pytest.raises(InternalError) as caught:
            success_body("r", {"value": bad})
        assert caught.value.request_id == "r"

    def test_undeliverable_error_data_is_dropped_not_fatal(self) -> None:
        body = json.loads(error_body(1, -32603, "Internal error", {"x": float("nan")}))
        assert body["error"] == {"code": -32603, "message": "Internal error"}


class TestCursorFormat:
    @pytest.mark.parametrize("name", ["a", "tool_b", "日本語", "x" * 128, ""])
    def test_a_cursor_round_trips(self, name: str) -> None:
        cursor = encode_cursor(name)
        assert decode_cursor(cursor) == name
        assert cursor.isascii()
        assert "=" not in cursor
