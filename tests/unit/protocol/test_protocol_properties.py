"""Property tests: no body or header set makes decode/classify raise anything but a row."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from gateway.config import JsonLimits
from gateway.errors import GatewayError
from gateway.protocol.classify import MAX_SAFE_INTEGER, classify, valid_id
from gateway.protocol.envelope import error_body, success_body
from gateway.protocol.jsonstrict import decode
from gateway.protocol.messages import McpMessage
from gateway.seams import HeaderParam
from tests.support.protocol import lookup, modern_body, request, tool

PROPERTY = settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TIGHT = JsonLimits(
    max_depth=6, max_members=8, max_array_length=8, max_string_bytes=64, max_number_chars=12
)
TOOLS = lookup(
    [
        tool(
            "search",
            HeaderParam(header="Region", path=("region",), type="string"),
            HeaderParam(header="Limit", path=("o", "limit"), type="integer"),
            HeaderParam(header="Exact", path=("exact",), type="boolean"),
        ),
        tool("plain"),
    ]
)

SEEDS: list[Any] = [
    modern_body("tools/call", name="search", arguments={"region": "eu", "o": {"limit": 3}}),
    modern_body("tools/list", cursor="MTp0b29s"),
    modern_body("server/discover", id="d"),
    request(
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"},
        },
        id=0,
    ),
    request("notifications/initialized", id="<none>"),
    request("tools/call", {"name": "plain", "arguments": {}}, id="x"),
    [request("ping", id=1), request("tools/list", id=2)],
]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    ),
    max_leaves=25,
)
WIRE_NAMES = [
    "jsonrpc",
    "id",
    "method",
    "params",
    "_meta",
    "name",
    "arguments",
    "cursor",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "progressToken",
    "region",
    "o",
    "limit",
    "exact",
    "protocolVersion",
    "capabilities",
    "clientInfo",
    "result",
]
WIRE_VALUES = [
    "2.0",
    "2026-07-28",
    "2025-06-18",
    "2025-03-26",
    "tools/call",
    "tools/list",
    "server/discover",
    "initialize",
    "ping",
    "notifications/initialized",
    "search",
    "plain",
    "eu",
    3,
    2**53,
    1.0,
    True,
    None,
    {},
    [],
]

header_names = st.sampled_from(
    [
        "MCP-Protocol-Version",
        "mcp-protocol-version",
        "Mcp-Method",
        "Mcp-Name",
        "Mcp-Param-Region",
        "mcp-param-limit",
        "Mcp-Param-Exact",
        "Mcp-Session-Id",
        "Content-Type",
    ]
)
header_values = st.sampled_from(
    [
        "2026-07-28",
        "2025-06-18",
        "2025-03-26",
        "2024-11-05",
        "tools/call",
        "tools/list",
        "search",
        " search ",
        "=?base64?c2VhcmNo?=",
        "=?base64?c2VhcmNo?",
        "=?base64?/w==?=",
        "eu",
        "3",
        "3.0",
        "true",
        "",
        "\t",
        "v999",
    ]
) | st.text(max_size=24)
header_sets = st.lists(st.tuples(header_names, header_values), max_size=6)


def as_headers(pairs: list[tuple[str, str]]) -> CIMultiDict[str]:
    out: CIMultiDict[str] = CIMultiDict()
    for name, value in pairs:
        out.add(name, value)
    return out


@st.composite
def mutated_messages(draw: st.DrawFn) -> Any:
    """A valid seed message with random members replaced, removed or added."""
    message = json.loads(json.dumps(draw(st.sampled_from(SEEDS))))
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        node = message
        while True:
            containers = (
                [
                    v
                    for v in (node.values() if isinstance(node, dict) else node)
                    if isinstance(v, dict | list)
                ]
                if isinstance(node, dict | list)
                else []
            )
            if not containers or draw(st.booleans()):
                break
            node = draw(st.sampled_from(containers))
        if isinstance(node, dict):
            key = draw(st.sampled_from(WIRE_NAMES) | st.sampled_from(sorted(node) or ["k"]))
            action = draw(st.sampled_from(["set", "delete", "random"]))
            if action == "delete":
                node.pop(key, None)
            elif action == "set":
                node[key] = copy.deepcopy(draw(st.sampled_from(WIRE_VALUES)))
            else:
                node[key] = draw(json_values)
        elif isinstance(node, list):
            node.append(copy.deepcopy(draw(json_values | st.sampled_from(SEEDS))))
    return message


@st.composite
def mutated_bodies(draw: st.DrawFn) -> bytes:
    body = bytearray(json.dumps(draw(mutated_messages())).encode())
    for _ in range(draw(st.integers(min_value=0, max_value=4))):
        position = draw(st.integers(min_value=0, max_value=max(0, len(body) - 1)))
        action = draw(st.sampled_from(["flip", "insert", "delete"]))
        byte = draw(st.sampled_from([*b'{}[]",:\\0-eE.\xff\xc3\xed ', 0]))
        if action == "flip" and body:
            body[position] = byte
        elif action == "insert":
            body.insert(position, byte)
        elif body:
            del body[position]
    return bytes(body)


@st.composite
def messages_with_matching_headers(draw: st.DrawFn) -> tuple[Any, list[tuple[str, str]]]:
    """A mutated message plus the headers a conforming client would send for it, mutated."""
    message = draw(mutated_messages())
    pairs: list[tuple[str, str]] = []
    if isinstance(message, dict):
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        meta = params.get("_meta") if isinstance(params.get("_meta"), dict) else {}
        version = meta.get("io.modelcontextprotocol/protocolVersion")
        if isinstance(version, str):
            pairs.append(("MCP-Protocol-Version", version))
        if isinstance(message.get("method"), str):
            pairs.append(("Mcp-Method", message["method"]))
        if isinstance(params.get("name"), str):
            pairs.append(("Mcp-Name", params["name"]))
        arguments = params.get("arguments")
        if isinstance(arguments, dict) and isinstance(arguments.get("region"), str):
            pairs.append(("Mcp-Param-Region", arguments["region"]))
    if draw(st.booleans()):
        pairs.extend(draw(header_sets))
    if pairs and draw(st.booleans()):
        del pairs[draw(st.integers(min_value=0, max_value=len(pairs) - 1))]
    return message, pairs


def check_admitted(result: McpMessage | tuple[McpMessage, ...]) -> None:
    messages = result if isinstance(result, tuple) else (result,)
    assert messages
    for message in messages:
        assert message.id is None or valid_id(message.id)
        assert message.era in ("modern", "legacy")
        assert isinstance(message.method, str)
        assert message.method


def check_error(error: GatewayError) -> None:
    assert error.status_for() in (200, 400, 404)
    assert error.request_id is None or valid_id(error.request_id)
    # Every row can be rendered whatever the request looked like.
    assert error_body(error.request_id, error.jsonrpc_code or -32603, error.message, error.data)


@PROPERTY
@given(st.binary(max_size=300))
def test_random_bytes_never_raise_anything_but_a_row(body: bytes) -> None:
    for limits in (TIGHT, JsonLimits()):
        try:
            decode(body, limits)
        except GatewayError as error:
            check_error(error)


@PROPERTY
@given(mutated_bodies(), header_sets)
def test_mutated_bodies_and_headers_never_raise_anything_but_a_row(
    body: bytes, pairs: list[tuple[str, str]]
) -> None:
    try:
        message = decode(body, TIGHT)
        result = classify(as_headers(pairs), message, TOOLS)
    except GatewayError as error:
        check_error(error)
        return
    check_admitted(result)


@PROPERTY
@given(messages_with_matching_headers())
def test_mutated_messages_never_raise_anything_but_a_row(
    case: tuple[Any, list[tuple[str, str]]],
) -> None:
    message, pairs = case
    try:
        result = classify(as_headers(pairs), message, TOOLS)
    except GatewayError as error:
        check_error(error)
        return
    check_admitted(result)
    for admitted in result if isinstance(result, tuple) else (result,):
        success_body(admitted.id, dict(admitted.params))


@PROPERTY
@given(json_values, header_sets)
def test_arbitrary_json_values_never_raise_anything_but_a_row(
    message: Any, pairs: list[tuple[str, str]]
) -> None:
    try:
        check_admitted(classify(as_headers(pairs), message, TOOLS))
    except GatewayError as error:
        check_error(error)


@PROPERTY
@given(json_values)
def test_whatever_the_decoder_admits_round_trips_through_json(value: Any) -> None:
    body = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
    try:
        decoded = decode(body, JsonLimits())
    except GatewayError:
        return
    assert decoded == value or json.dumps(decoded) == json.dumps(value)


@PROPERTY
@given(st.integers())
def test_integer_ids_are_valid_exactly_within_the_safe_range(number: int) -> None:
    assert valid_id(number) == (abs(number) <= MAX_SAFE_INTEGER)
