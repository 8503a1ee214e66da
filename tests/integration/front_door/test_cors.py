"""CORS (``cors.enabled``, gateway/http/pipeline/cors.py) through the real listener, header by
header.

The browser side of the same contract is tests/e2e/test_browser_cors.py (Chromium).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from gateway.config import Config, CorsConfig, Rate
from gateway.http.pipeline.cors import ALLOWED_HEADERS, EXPOSED_HEADERS, MAX_PARAM_HEADERS
from gateway.http.pipeline.routes import PRM_ROOT_PATH
from tests.integration.front_door.conftest import MakeGateway
from tests.support.gateway_harness import harness_config, modern_headers, modern_request

APP = "http://app.example.test:8443"
EVIL = "https://evil.example"
SELF = "https://mcp.example.com"  # the harness resource's own origin


def cors_config(*, enabled: bool = True, **limits: Any) -> Config:
    return dataclasses.replace(
        harness_config(**limits),
        allowed_origins=frozenset({APP}),
        cors=CorsConfig(enabled=enabled, max_age_s=321),
    )


def preflight_headers(origin: str = APP, **extra: str) -> dict[str, str]:
    return {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,mcp-method,mcp-name,"
        "mcp-protocol-version,traceparent",
        **extra,
    }


def assert_cors(headers: Any, origin: str = APP) -> None:
    assert headers["Access-Control-Allow-Origin"] == origin
    assert headers["Access-Control-Expose-Headers"] == EXPOSED_HEADERS
    assert "Origin" in headers.getall("Vary")
    assert "Access-Control-Allow-Credentials" not in headers


def assert_no_cors(headers: Any) -> None:
    assert not [name for name in headers if name.lower().startswith("access-control-")]


class TestPreflight:
    async def test_an_allowed_origin_is_answered_before_authentication(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(config=cors_config())
        response = await gw.client.options("/mcp", headers=preflight_headers())
        assert response.status == 204
        headers = response.headers
        assert headers["Access-Control-Allow-Origin"] == APP
        assert headers["Access-Control-Allow-Methods"] == "POST, GET, DELETE"
        assert headers["Access-Control-Allow-Headers"] == ", ".join(ALLOWED_HEADERS)
        assert headers["Access-Control-Max-Age"] == "321"
        assert headers["Vary"] == (
            "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
        )
        assert "WWW-Authenticate" not in headers
        assert await response.read() == b""
        assert gw.authenticator.calls == 0  # no token, and none asked for

    async def test_the_requested_mcp_param_headers_are_allowed_and_nothing_else(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(config=cors_config())
        asked = "authorization, mcp-param-region, x-evil, Mcp-Param-Tenant_ID, mcp-param-"
        response = await gw.client.options(
            "/mcp", headers=preflight_headers(**{"Access-Control-Request-Headers": asked})
        )
        allowed = response.headers["Access-Control-Allow-Headers"].split(", ")
        assert allowed == [*ALLOWED_HEADERS, "mcp-param-region", "mcp-param-tenant_id"]

    async def test_the_mcp_param_headers_are_capped(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config())
        asked = ",".join(f"mcp-param-p{i}" for i in range(MAX_PARAM_HEADERS + 5))
        response = await gw.client.options(
            "/mcp", headers=preflight_headers(**{"Access-Control-Request-Headers": asked})
        )
        allowed = response.headers["Access-Control-Allow-Headers"].split(", ")
        assert len(allowed) == len(ALLOWED_HEADERS) + MAX_PARAM_HEADERS

    @pytest.mark.row("origin_forbidden")
    async def test_a_disallowed_origin_gets_403_and_no_cors_header(
        self, make_gw: MakeGateway
    ) -> None:
        gw = await make_gw(config=cors_config())
        response = await gw.client.options("/mcp", headers=preflight_headers(EVIL))
        assert response.status == 403
        assert await response.read() == b""
        assert response.headers["Cache-Control"] == "no-store"
        assert_no_cors(response.headers)
        assert response.headers["Vary"] == "Origin"

    async def test_the_resources_own_origin_is_trusted(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config())
        response = await gw.client.options("/mcp", headers=preflight_headers(SELF))
        assert response.status == 204
        assert response.headers["Access-Control-Allow-Origin"] == SELF

    @pytest.mark.row("method_not_allowed")
    async def test_an_options_that_is_no_preflight_is_405(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config())
        response = await gw.client.options("/mcp", headers={"Origin": APP})
        assert response.status == 405
        assert response.headers["Allow"] == "POST"
        assert_cors(response.headers)  # a browser may read it
        response = await gw.client.options("/mcp")
        assert response.status == 405

    async def test_without_cors_an_options_is_405_as_before(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config(enabled=False))
        response = await gw.client.options("/mcp", headers=preflight_headers())
        assert response.status == 405
        assert response.headers["Allow"] == "POST"
        assert_no_cors(response.headers)
        assert "Vary" not in response.headers


def discover(origin: str | None = APP, **headers: str) -> tuple[bytes, dict[str, str]]:
    fields = modern_headers("server/discover", **headers)
    if origin is not None:
        fields["Origin"] = origin
    return json.dumps(modern_request("server/discover", 1)).encode(), fields


class TestEveryAnswer:
    async def test_a_tool_call_and_a_list(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config())
        response = await gw.call_tool("echo", {"text": "hi"}, Origin=APP)
        assert response.status == 200
        assert_cors(response.headers)
        body, headers = discover()
        response = await gw.post(body, headers)
        assert response.status == 200
        assert_cors(response.headers)

    @pytest.mark.parametrize(
        ("headers", "status", "exposed"),
        [
            ({"Authorization": ""}, 401, "WWW-Authenticate"),
            ({"Authorization": "Bearer nope"}, 401, "WWW-Authenticate"),
            ({"Authorization": "Bearer no-baseline"}, 403, "WWW-Authenticate"),
            ({"Content-Type": "text/plain"}, 415, None),
        ],
        ids=["401 no token", "401 bad token", "403 scope", "415"],
    )
    async def test_rejections(
        self, make_gw: MakeGateway, headers: dict[str, str], status: int, exposed: str | None
    ) -> None:
        gw = await make_gw(config=cors_config())
        body, fields = discover(**headers)
        response = await gw.post(body, {k: v for k, v in fields.items() if v})
        assert response.status == status
        assert_cors(response.headers)
        if exposed is not None:
            assert exposed in response.headers

    async def test_429_with_retry_after(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config(pre_auth_rate=Rate(1, 60.0)))
        body, fields = discover()
        assert (await gw.post(body, fields)).status == 200
        response = await gw.post(body, fields)
        assert response.status == 429
        assert "Retry-After" in response.headers
        assert_cors(response.headers)

    async def test_503_with_retry_after(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config(max_in_flight=0))
        body, fields = discover()
        response = await gw.post(body, fields)
        assert response.status == 503
        assert "Retry-After" in response.headers
        assert_cors(response.headers)

    async def test_405_get(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config())
        response = await gw.client.get("/mcp", headers={"Origin": APP})
        assert response.status == 405
        assert_cors(response.headers)

    @pytest.mark.parametrize(
        ("origin", "status"), [(EVIL, 403), (None, 200)], ids=["a disallowed origin", "no origin"]
    )
    async def test_without_an_allowed_origin_no_cors_headers_only_vary(
        self, make_gw: MakeGateway, origin: str | None, status: int
    ) -> None:
        gw = await make_gw(config=cors_config())
        response = await gw.post(*discover(origin))
        assert response.status == status
        assert_no_cors(response.headers)
        assert response.headers["Vary"] == "Origin"

    async def test_without_cors_nothing_changes(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config(enabled=False))
        body, fields = discover()
        response = await gw.post(body, fields)
        assert response.status == 200
        assert_no_cors(response.headers)
        assert "Vary" not in response.headers


class TestMetadata:
    @pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", PRM_ROOT_PATH])
    async def test_an_allowed_origin_is_named(self, make_gw: MakeGateway, path: str) -> None:
        gw = await make_gw(config=cors_config())
        response = await gw.client.get(path, headers={"Origin": APP})
        assert response.status == 200
        assert_cors(response.headers)
        response = await gw.client.get(path, headers={"Origin": EVIL})
        assert response.status == 200  # public metadata; the browser hides it from that page
        assert_no_cors(response.headers)
        assert response.headers["Vary"] == "Origin"  # it is cacheable (public, max-age)

    async def test_its_preflight(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config())
        path = "/.well-known/oauth-protected-resource/mcp"
        asked = {"Access-Control-Request-Method": "GET"}
        response = await gw.client.options(path, headers={"Origin": APP, **asked})
        assert response.status == 204
        assert response.headers["Access-Control-Allow-Methods"] == "GET, HEAD"
        assert response.headers["Access-Control-Allow-Headers"] == "Mcp-Protocol-Version"
        assert response.headers["Access-Control-Allow-Origin"] == APP
        response = await gw.client.options(path, headers={"Origin": EVIL, **asked})
        assert response.status == 403
        assert_no_cors(response.headers)

    async def test_without_cors_any_origin_reads_it(self, make_gw: MakeGateway) -> None:
        gw = await make_gw(config=cors_config(enabled=False))
        response = await gw.client.get(PRM_ROOT_PATH, headers={"Origin": EVIL})
        assert response.headers["Access-Control-Allow-Origin"] == "*"
