"""End to end: OAuth as Claude Code and Codex do it, then revocation, against the demo stack.

Acceptance (b) and (c) of issue 7: starting from the gateway's 401 challenge, discover the
protected-resource metadata (RFC 9728), the authorization server metadata (RFC 8414), register
dynamically (RFC 7591), authorize with PKCE S256 and ``resource`` (RFC 7636, RFC 8707), check
``iss`` (RFC 9207), exchange the code and call MCP with the token; then revoke a token (RFC 7009)
and see the gateway answer 401 within its introspection cache bound.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from gateway.demo.stack import DemoStack
from tests.support.demo_stack import (
    CACHE_BOUND_S,
    READER_TOOLS,
    modern_body,
    modern_headers,
    parse_challenge,
)
from tests.support.dev_http import HttpClient, http_client
from tests.support.oauth_flow import (
    code_flow,
    dev_endpoints,
)


async def _tools_list(http: HttpClient, url: str, token: str | None) -> tuple[int, Any, Any]:
    response = await http.post(
        url, json=modern_body("tools/list"), headers=modern_headers(token, "tools/list")
    )
    raw = await response.read()
    body = await response.json() if raw and response.content_type == "application/json" else None
    return response.status, body, response.headers


async def test_a_client_goes_from_the_401_challenge_to_a_working_token(
    demo_stack: DemoStack,
) -> None:
    async with http_client() as http:
        # 1. No token: 401 with the PRM location and the scope to ask for (RFC 9728 §5.1).
        status, _, headers = await _tools_list(http, demo_stack.mcp_url, None)
        assert status == 401
        challenge = parse_challenge(headers["WWW-Authenticate"])
        assert "error" not in challenge  # RFC 6750 §3.1: no error code without credentials
        scope = challenge["scope"]
        assert "mcp:access" in scope.split()

        # 2. Protected-resource metadata: the resource and its authorization server.
        prm_response = await http.get(challenge["resource_metadata"])
        prm = await prm_response.json()
        assert prm["resource"] == demo_stack.mcp_url
        issuer = prm["authorization_servers"][0]
        assert issuer == demo_stack.issuer_url

        # 3. Authorization server metadata; its issuer must match exactly (RFC 8414 §3.3).
        metadata = await (await http.get(f"{issuer}/.well-known/oauth-authorization-server")).json()
        assert metadata["issuer"] == issuer
        assert "S256" in metadata["code_challenge_methods_supported"]

        # 4-6. Dynamic registration as a public native client; authorization with PKCE and
        # resource, auto-approved and read without a browser; the code for tokens, with the
        # same resource (RFC 8707 §2.2).
        flow = await code_flow(
            http, metadata, scope=scope, resource=prm["resource"], token_resource=prm["resource"]
        )
        assert flow.authorization.params["iss"] == issuer  # RFC 9207 §2: mix-up defence
        assert flow.authorization.params["state"] == "state-123"
        assert flow.status == 200, flow.token
        token = flow.token

        # 7. The MCP call succeeds; the demo issuer's auto-approval makes the user a reader.
        status, body, _ = await _tools_list(http, demo_stack.mcp_url, token["access_token"])
        assert status == 200, body
        assert {tool["name"] for tool in body["result"]["tools"]} == READER_TOOLS
    assert not demo_stack.backend.saw(token["access_token"])


async def test_a_token_for_another_audience_is_answered_401_invalid_token(
    demo_stack: DemoStack,
) -> None:
    token = demo_stack.issuer.mint_token(
        sub="mallory", scopes="mcp:access notes:read", audience="http://127.0.0.1:1/other"
    )
    async with http_client() as http:
        status, _, headers = await _tools_list(http, demo_stack.mcp_url, token)
    assert status == 401
    assert parse_challenge(headers["WWW-Authenticate"])["error"] == "invalid_token"


async def _oauth_token(http: HttpClient, stack: DemoStack) -> tuple[str, dict[str, Any]]:
    """Register, authorize and exchange (the steps of the test above, without the discovery)."""
    flow = await code_flow(http, dev_endpoints(stack.issuer_url), resource=stack.mcp_url)
    assert flow.status == 200, flow.token
    token = flow.token
    client = flow.client
    return client["client_id"], token


async def test_a_revoked_token_is_answered_401_within_the_cache_bound(
    demo_stack: DemoStack,
) -> None:
    async with http_client() as http:
        client_id, token = await _oauth_token(http, demo_stack)
        access = token["access_token"]
        status, _, _ = await _tools_list(http, demo_stack.mcp_url, access)
        assert status == 200  # introspected once; the gateway may now serve it from its cache
        # RFC 7009 §2.1: a public client revokes its own token with its client_id.
        revoke = await http.post(
            f"{demo_stack.issuer_url}/revoke",
            data={"token": access, "token_type_hint": "access_token", "client_id": client_id},
        )
        assert revoke.status == 200
        revoked_at = time.monotonic()
        while True:
            status, _, headers = await _tools_list(http, demo_stack.mcp_url, access)
            elapsed = time.monotonic() - revoked_at
            if status == 401:
                break
            assert status == 200
            assert elapsed <= CACHE_BOUND_S + 1.5, "a revoked token outlived the cache bound"
            await asyncio.sleep(0.1)
    assert parse_challenge(headers["WWW-Authenticate"])["error"] == "invalid_token"
    assert elapsed <= CACHE_BOUND_S + 1.5
