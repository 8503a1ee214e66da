"""A 2025-03-26 batch of two ``tools/call`` members whose second one is refused after the
local policy allowed it (by the external decision point, by a refused token exchange): the
batch answers 200, the refused member gets its own error and the other its result."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["assert_only_the_second_refused", "two_tool_calls"]


def two_tool_calls(first: str, second: str) -> list[dict[str, Any]]:
    """``tools/call`` of ``first`` (id 1, text ``a``), then of ``second`` (id 2, text ``b``)."""
    return [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": first, "arguments": {"text": "a"}},
        },
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": second, "arguments": {"text": "b"}},
        },
    ]


def assert_only_the_second_refused(status: int, text: str, *, message: str, reason: str) -> None:
    """Member 1 got its result; member 2 the ``-31403`` error ``message`` with ``data.reason``."""
    assert status == 200, text
    first, second = json.loads(text)
    assert first["id"] == 1 and first["result"]["isError"] is not True
    assert second == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {"code": -31403, "message": message, "data": {"reason": reason}},
    }
