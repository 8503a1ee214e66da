"""Rows rendered from the authenticator and the policy (pipeline steps 5-9, 15-16).

The fake authenticator raises the same rows as ``gateway.auth``; these tests pin down how the
front door renders them (status, challenge header, Retry-After, body) and where in the pipeline
they happen.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from gateway.errors import BAD_REQUEST_CODE, FORBIDDEN_CODE, RATE_LIMITED_CODE, UNAUTHORIZED_CODE
from tests.integration.front_door.conftest import MakeGateway
from tests.support.assertions import assert_error, assert_json_ok
from tests.support.fakes import PRM_URL, principal
from tests.support.gateway_harness import MODERN, Gateway, modern_headers, modern_request
from tests.support.schemas import validate_response

DISCOVER = modern_request("server/discover", 1)


class TestAuthenticationRows:
    @pytest.mark.row("no_credentials")
    async def test_a_request_without_credentials_is_answered_401_with_resource_metadata(
        self, gw: Gateway
    ) -> None:
        headers = modern_headers("server/discover")
        del headers["Authorization"]
        response = await gw.post(DISCOVER, headers)
        payload = await assert_error(response, 401, UNAUTHORIZED_CODE)
        assert response.headers["WWW-Authenticate"] == (
            f'Bearer resource_metadata="{PRM_URL}", scope="mcp:access"'
        )
        # A JSON-RPC error the SDKs surface, naming what is missing (issue 11 item 4).
        assert payload is not None
        assert payload["error"] == {
            "code": UNAUTHORIZED_CODE,
            "message": "Authentication required: send an OAuth access token with scope mcp:access",
            "data": {"required_scopes": ["mcp:access"]},
        }
        validate_response(MODERN, payload)

    @pytest.mark.row("invalid_token")
    async def test_an_unknown_token_is_answered_401_invalid_token(self, gw: Gateway) -> None:
        headers = modern_headers("server/discover", Authorization="Bearer s3cr3t-unknown")
        response = await gw.post(DISCOVER, headers)
        payload = await assert_error(response, 401, UNAUTHORIZED_CODE)
        assert response.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
        assert payload == {
            "jsonrpc": "2.0",
            "id": None,  # authentication runs before the body is read
            "error": {
                "code": UNAUTHORIZED_CODE,
                "message": "Invalid or expired access token",
                "data": {"required_scopes": ["mcp:access"]},
            },
        }
        assert b"s3cr3t" not in await response.read()

    @pytest.mark.row("token_in_query")
    async def test_a_token_in_the_query_is_answered_400_invalid_request(self, gw: Gateway) -> None:
        response = await gw.post(
            DISCOVER, modern_headers("server/discover"), path="/mcp?access_token=abc"
        )
        await assert_error(response, 400, BAD_REQUEST_CODE)
        assert response.headers["WWW-Authenticate"] == 'Bearer error="invalid_request"'

    @pytest.mark.row("issuer_unavailable")
    async def test_an_issuer_outage_is_answered_503_retry_after_never_anonymous(
        self, gw: Gateway
    ) -> None:
        headers = modern_headers("server/discover", Authorization="Bearer issuer-down")
        response = await gw.post(DISCOVER, headers)
        await assert_error(response, 503)
        assert response.headers["Retry-After"] == "5"
        assert response.headers["WWW-Authenticate"] == f'Bearer resource_metadata="{PRM_URL}"'

    @pytest.mark.row("invalid_token")
    async def test_a_token_that_expires_before_dispatch_is_answered_401(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(tokens={"short": principal("dave", "mcp:access", ttl_s=0.3)})

        raw = json.dumps(DISCOVER).encode()

        async def late_body() -> AsyncIterator[bytes]:
            yield raw[:20]
            await asyncio.sleep(0.5)
            yield raw[20:]

        started = time.time()
        response = await gw.client.post(
            "/mcp",
            data=late_body(),
            headers=modern_headers("server/discover", Authorization="Bearer short"),
        )
        await assert_error(response, 401)
        assert time.time() - started >= 0.3
        assert response.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"')


class TestScopeRows:
    @pytest.mark.row("insufficient_scope")
    async def test_a_token_without_the_baseline_scope_is_answered_403_naming_it(
        self, gw: Gateway
    ) -> None:
        headers = modern_headers("server/discover", Authorization="Bearer no-baseline")
        response = await gw.post(DISCOVER, headers)
        payload = await assert_error(response, 403, FORBIDDEN_CODE)
        assert response.headers["WWW-Authenticate"] == (
            f'Bearer error="insufficient_scope", scope="mcp:access", resource_metadata="{PRM_URL}"'
        )
        assert payload is not None
        assert payload["error"] == {
            "code": FORBIDDEN_CODE,
            "message": "Insufficient scope: requires mcp:access",
            "data": {"required_scopes": ["mcp:access"], "missing_scopes": ["mcp:access"]},
        }

    @pytest.mark.row("insufficient_scope")
    async def test_a_method_needing_extra_scopes_is_answered_403_with_them(
        self, gw: Gateway
    ) -> None:
        gw.policy.policy.method_scopes["tools/list"] = ("tools:read",)
        body = modern_request("tools/list", 2)
        response = await gw.post(body, modern_headers("tools/list"))
        payload = await assert_error(response, 403, FORBIDDEN_CODE, request_id=2)
        assert 'scope="mcp:access tools:read"' in response.headers["WWW-Authenticate"]
        assert payload is not None
        assert payload["error"]["message"] == "Insufficient scope: requires tools:read"
        assert payload["error"]["data"] == {
            "required_scopes": ["mcp:access", "tools:read"],
            "missing_scopes": ["tools:read"],
        }

    @pytest.mark.row("tool_insufficient_scope")
    async def test_a_visible_tool_needing_more_scopes_is_answered_403_step_up(
        self, gw: Gateway
    ) -> None:
        response = await gw.call_tool("create_ticket", {"title": "x"})
        payload = await assert_error(response, 403, FORBIDDEN_CODE, request_id=7)
        assert response.headers["WWW-Authenticate"] == (
            'Bearer error="insufficient_scope", scope="mcp:access tickets:write", '
            f'resource_metadata="{PRM_URL}"'
        )
        assert payload is not None
        assert payload["error"] == {
            "code": FORBIDDEN_CODE,
            "message": "Insufficient scope: requires tickets:write",
            "data": {
                "required_scopes": ["mcp:access", "tickets:write"],
                "missing_scopes": ["tickets:write"],
            },
        }
        validate_response(MODERN, payload)
        assert gw.backend.calls == []

    @pytest.mark.row("rate_limited")
    async def test_a_tool_rate_limit_is_answered_429_retry_after(self, gw: Gateway) -> None:
        for _ in range(2):
            await assert_json_ok(
                await gw.call_tool("create_ticket", {"title": "x"}, Authorization="Bearer ops")
            )
        response = await gw.call_tool("create_ticket", {"title": "x"}, Authorization="Bearer ops")
        await assert_error(response, 429, RATE_LIMITED_CODE, request_id=7)
        assert int(response.headers["Retry-After"]) >= 1
        assert len(gw.backend.calls) == 2

    @pytest.mark.row("rate_limited")
    async def test_a_tool_concurrency_cap_is_answered_429_retry_after_1(self, gw: Gateway) -> None:
        first = asyncio.create_task(gw.call_tool("slow", {"seconds": 10}))
        async with asyncio.timeout(5):
            while not gw.backend.calls:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        response = await gw.call_tool("slow", {"seconds": 10})
        await assert_error(response, 429, RATE_LIMITED_CODE, request_id=7)
        assert response.headers["Retry-After"] == "1"
        # Another subject has its own slot.
        other = asyncio.create_task(
            gw.call_tool("slow", {"seconds": 10}, Authorization="Bearer ops")
        )
        async with asyncio.timeout(5):
            while len(gw.backend.calls) < 2:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        gw.backend.release.set()
        await assert_json_ok(await first)
        await assert_json_ok(await other)

    async def test_a_policy_swap_mid_request_does_not_change_that_request(
        self, gw: Gateway
    ) -> None:
        from tests.support.fakes import FakePolicy

        task = asyncio.create_task(gw.call_tool("slow", {"seconds": 10}))
        async with asyncio.timeout(5):
            while not gw.backend.calls:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        gw.policy.policy = FakePolicy(rules={})
        gw.backend.release.set()
        await assert_json_ok(await task)
        response = await gw.call_tool("echo", {"text": "hi"})
        await assert_error(response, 400, -32602, request_id=7)
