"""The running demo stack for end-to-end tests (gateway + development issuer + demo backend).

Import the fixture into a test module: ``from tests.support.demo_stack import demo_stack``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest

from gateway.demo.stack import DemoStack, start_demo, wait_ready
from tests.support.mcp_client import legacy_headers, modern_headers

__all__ = [
    "CACHE_BOUND_S",
    "READER_TOOLS",
    "demo_stack",
    "legacy_headers",
    "modern_body",
    "modern_headers",
    "parse_challenge",
]

CACHE_BOUND_S: Final = 1
"""The demo gateway's introspection cache bound (issuer.cache.max_ttl_s) in these tests."""
READER_TOOLS: Final = {
    "echo",
    "time_now",
    "notes_list",
    "notes_summarize",
    "notes_report",
    "workspace_roots",
    "whoami",
    "vault__whoami",
    "accounts__whoami",
    "accounts__notes_write",
}
"""What gateway/dev/demo-policy.yaml lets a token with ``mcp:access notes:read`` see."""
MODERN: Final = "2026-07-28"


@pytest.fixture
async def demo_stack() -> AsyncIterator[DemoStack]:
    stack = await start_demo(port=0, cache_max_ttl_s=CACHE_BOUND_S)
    try:
        assert await wait_ready(stack, timeout_s=15), "the demo gateway never became ready"
        yield stack
    finally:
        await stack.stop()


def modern_body(method: str, params: dict[str, Any] | None = None, rid: int = 1) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
    }
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": method,
        "params": {**(params or {}), "_meta": meta},
    }


def parse_challenge(header: str) -> dict[str, str]:
    """RFC 6750 §3 ``WWW-Authenticate: Bearer k="v", ...`` parameters (quoted values only)."""
    assert header.startswith("Bearer"), header
    return dict(re.findall(r'([A-Za-z_]+)="([^"]*)"', header))
