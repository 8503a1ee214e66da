"""End to end: ``mcp-gateway demo``'s second backend, the vault, gets the caller by RFC 8693
token exchange at the development issuer (issue 16; two backends behind one endpoint, issue 14).

The vault is a resource server of its own: it asks the issuer about every bearer token it
receives (introspection with its own client, or the JWT against the issuer's JWK Set when the
issuer has no introspection endpoint) and serves only tokens meant for it. The official ``mcp``
SDK is the client, in both eras; the caller's token must never reach either backend.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.demo.stack import DemoStack, start_demo, wait_ready
from tests.support.dev_http import http_client
from tests.support.sdk_stack import sdk_session


@pytest.fixture(params=["introspection", "jwt"])
async def demo(request: pytest.FixtureRequest) -> AsyncIterator[DemoStack]:
    stack = await start_demo(port=0, cache_max_ttl_s=1, tokens=request.param)
    try:
        assert await wait_ready(stack, timeout_s=15), "the demo never became ready"
        yield stack
    finally:
        await stack.stop()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_vault_whoami_shows_the_caller_of_an_issuer_minted_token(
    demo: DemoStack, mode: str
) -> None:
    vault = demo.vault
    assert vault is not None
    token = demo.tokens["reader"]
    async with sdk_session(demo.mcp_url, token, mode) as client:
        assert "vault__whoami" in {tool.name for tool in (await client.list_tools()).tools}
        for _ in range(2):  # the second call reuses the exchanged token
            result = await client.call_tool("vault__whoami", {})
            assert result.is_error is False, result
        seen = result.structured_content
        assert seen is not None
        assert seen["sub"] == "demo-reader"
        assert seen["aud"] in (vault.url, [vault.url])
        assert seen["act"] == {"sub": "mcp-gateway-exchange"}
        assert seen["scope"] == "mcp:access notes:read"
        assert "demo-reader" in result.content[0].text  # type: ignore[union-attr]
        assert (await client.call_tool("whoami", {})).is_error is False  # the other backend
    assert vault.seen_subjects == ["demo-reader", "demo-reader"]
    assert vault.auth_failures == 0
    assert demo.issuer.exchange_faults.calls == 1  # one exchange, cached for the second call
    # The caller's token reached neither backend; each got only its own credential.
    assert not vault.saw(token) and not demo.backend.saw(token)
    assert not vault.saw(demo.backend.service_token)
    vault_tokens = {r.header("Authorization") for r in vault.received}
    assert not any(value and demo.backend.saw(value[7:]) for value in vault_tokens)


async def test_readyz_names_every_demo_backend(demo: DemoStack) -> None:
    async with http_client() as http, http.get(demo.ops_url + "/readyz") as response:
        assert response.status == 200
        body = await response.json()
    assert {name: (b["ready"], b["era"]) for name, b in body["backends"].items()} == {
        "notes": (True, "modern"),
        "vault": (True, "modern"),
        "accounts": (True, "modern"),
    }
