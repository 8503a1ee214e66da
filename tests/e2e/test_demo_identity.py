"""End to end: ``mcp-gateway demo``'s backend verifies who is calling from the gateway's signed
caller assertion (issue 16), with the official ``mcp`` SDK as the client, in both eras.

The demo backend refuses any ``tools/call`` without a valid assertion, fetching the gateway's
JWK Set from the ops listener, and its ``whoami`` tool shows the verified caller."""

from __future__ import annotations

import pytest

from gateway.demo.stack import DemoStack
from tests.support.dev_http import http_client
from tests.support.sdk_stack import sdk_session


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_whoami_shows_the_caller_the_backend_verified(
    demo_stack: DemoStack, mode: str
) -> None:
    token = demo_stack.tokens["writer"]
    async with sdk_session(demo_stack.mcp_url, token, mode) as client:
        result = await client.call_tool("whoami", {})
        assert result.is_error is False, result
        caller = result.structured_content
        assert caller is not None
        assert caller["sub"] == "demo-writer"
        assert caller["client_id"] == "demo-cli"
        assert caller["scope"] == "mcp:access notes:read notes:write"
        assert caller["tool"] == {"name": "whoami", "upstream": "whoami"}
        assert 0 < caller["expires_in_s"] <= 60
        assert "demo-writer" in result.content[0].text  # type: ignore[union-attr]
        assert (await client.call_tool("echo", {"text": "hi"})).is_error is False
    assert demo_stack.backend.auth_failures == 0
    assert demo_stack.backend.caller_check is not None
    assert demo_stack.backend.caller_check.fetches == 1  # the key set, fetched once


async def test_the_demo_publishes_its_assertion_key_on_the_ops_listener(
    demo_stack: DemoStack,
) -> None:
    async with (
        http_client() as http,
        http.get(demo_stack.ops_url + "/.well-known/jwks.json") as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/jwk-set+json"
        body = await response.json(content_type=None)
    (key,) = body["keys"]
    assert (key["kty"], key["crv"], key["alg"]) == ("OKP", "Ed25519", "EdDSA")
    assert "d" not in key
