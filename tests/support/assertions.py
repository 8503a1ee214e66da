"""Assertions shared by the front-door tests (status, JSON-RPC code, mandatory headers)."""

from __future__ import annotations

import json
from typing import Any

from tests.support.schemas import validate_response

__all__ = ["assert_error", "assert_json_ok"]


async def assert_error(
    response: Any,
    status: int,
    code: int | None = None,
    *,
    request_id: Any = None,
    empty: bool = False,
) -> dict[str, Any] | None:
    """Assert a rendered status-table row: status, no-store, JSON-RPC code and id, no echo."""
    body = await response.read()
    assert response.status == status, (response.status, body[:200])
    assert response.headers["Cache-Control"] == "no-store"
    assert "Mcp-Session-Id" not in response.headers
    if empty:
        assert body == b""
        return None
    assert response.headers["Content-Type"] == "application/json"
    payload: dict[str, Any] = json.loads(body)
    if code is not None:
        assert payload["jsonrpc"] == "2.0"
        assert payload["id"] == request_id
        assert payload["error"]["code"] == code
        assert isinstance(payload["error"]["message"], str)
    return payload


async def assert_json_ok(
    response: Any, *, revision: str | None = "2026-07-28", method: str | None = None
) -> dict[str, Any]:
    """Assert a 200 JSON success and validate it against ``revision``'s official schema."""
    body = await response.read()
    assert response.status == 200, (response.status, body[:300])
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    assert "Mcp-Session-Id" not in response.headers
    payload: dict[str, Any] = json.loads(body)
    if revision is not None:
        validate_response(revision, payload, method)
    return payload
