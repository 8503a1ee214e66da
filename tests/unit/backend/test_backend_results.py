"""CallToolResult checks and the fixed failure texts (docs/backends.md §Failure mapping)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.backend.upstream.rpc import UpstreamFault, decode_json
from gateway.backend.upstream.tool_results import (
    failed_call,
    fault_outcome,
    fault_text,
    sanitize_result,
)


def test_only_passthrough_keys_survive_and_server_info_is_dropped() -> None:
    result = sanitize_result(
        {
            "resultType": "complete",
            "ttlMs": 5,
            "cacheScope": "public",
            "content": [{"type": "text", "text": "hi"}],
            "structuredContent": [1, 2],
            "isError": False,
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "x"}, "a/b": 1},
            "extra": True,
        }
    )
    assert result == {
        "content": [{"type": "text", "text": "hi"}],
        "structuredContent": [1, 2],
        "isError": False,
        "_meta": {"a/b": 1},
    }


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({}, id="no content"),
        pytest.param({"content": "x"}, id="content not a list"),
        pytest.param({"content": [{"text": "x"}]}, id="block without type"),
        pytest.param({"content": [], "isError": "yes"}, id="isError not boolean"),
        pytest.param({"content": [], "_meta": []}, id="_meta not an object"),
        pytest.param({"resultType": "input_required", "content": []}, id="input_required"),
    ],
)
def test_a_result_of_the_wrong_shape_is_refused(bad: dict[str, Any]) -> None:
    assert sanitize_result(bad) is None


def test_fault_texts_are_fixed_and_short() -> None:
    assert fault_text("timeout") == "Upstream tool timed out"
    assert fault_text("too_large") == "Upstream reply too large"
    assert fault_text("garbled") == "Upstream tool failed"
    assert fault_outcome("connection") == "upstream_error"
    assert failed_call("b", "t", "bad_result") == (
        {"content": [{"type": "text", "text": "Upstream tool failed"}], "isError": True},
        "upstream_error",
    )


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'{"a":1,"a":2}', id="duplicate key"),
        pytest.param(b'{"a":NaN}', id="NaN"),
        pytest.param(b"\xff", id="not UTF-8"),
        pytest.param(b"[" * 100_000, id="too deep"),
        pytest.param(b"", id="empty"),
    ],
)
def test_reply_decoding_is_strict(raw: bytes) -> None:
    with pytest.raises(UpstreamFault) as caught:
        decode_json(raw)
    assert caught.value.kind == "garbled"
