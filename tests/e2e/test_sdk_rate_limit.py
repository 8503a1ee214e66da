"""The official ``mcp`` SDK shows its user the gateway's 429, not a generic failure.

Issue 32 item 7: the 429 body was OAuth-style JSON (``{"error":"rate_limited",...}``), so the
Python SDK, which surfaces a non-2xx body only when it is a JSON-RPC error, raised ``MCPError:
Server returned an error response``. The body is now a JSON-RPC error (``-31429``) whose
message says when to retry; ``Retry-After`` is unchanged. Both eras, against the production
wiring with a tool limited to one call a minute.
"""

from __future__ import annotations

import pytest
from mcp.shared.exceptions import MCPError

from gateway.errors import RATE_LIMITED_CODE
from tests.support.live_stack import MakeStack
from tests.support.sdk_stack import sdk_session

POLICY = """
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: [tools:echo], rate_limit: 1/minute}
"""


@pytest.mark.row("rate_limited")
@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["modern", "legacy"])
async def test_a_rate_limited_tool_call_reaches_the_sdk_user_as_a_readable_error(
    make_stack: MakeStack, mode: str
) -> None:
    async with make_stack(policy=POLICY) as stack:
        token = stack.token()
        async with sdk_session(stack.server.mcp_url, token, mode) as c:
            first = await c.call_tool("echo", {"text": "once"})
            assert first.is_error is False
            with pytest.raises(MCPError) as caught:
                await c.call_tool("echo", {"text": "twice"})
    message = str(caught.value)
    assert message.startswith("Too many requests, retry in "), message
    assert message.endswith(" s")
    # At most two windows: the window holding the one call, then that call decaying as the next
    # window's previous count (docs/operations.md, rate limits).
    assert 1 <= int(message.removeprefix("Too many requests, retry in ").removesuffix(" s")) <= 120
    assert caught.value.error.code == RATE_LIMITED_CODE
