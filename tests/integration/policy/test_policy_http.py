"""The real policy layer behind the real front door: filtered listings, step-up 403s, hidden
tools answered as unknown, and hot reload without a restart.

The gateway is the front door of ``gateway.http`` on loopback with the fake authenticator and
backend of ``tests/support/fakes.py``; the policy source is the real :class:`PolicyReloader`
over a YAML file in a temporary directory, and challenges come from the real
``gateway.auth.challenge`` builder.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from gateway.auth.challenge import challenge_for
from gateway.errors import GatewayError
from gateway.http.pipeline.endpoint import McpEndpoint
from gateway.http.pipeline.routes import add_mcp_routes
from gateway.limits.memory import MemoryRateLimiter
from gateway.policy.policy_set import PolicySet
from gateway.policy.reload import PolicyReloader
from tests.support.assertions import assert_error, assert_json_ok
from tests.support.fakes import PRM_URL, FakeAuthenticator, FakeBackend, principal
from tests.support.gateway_harness import (
    MODERN,
    harness_config,
    legacy_headers,
    modern_headers,
    modern_request,
)
from tests.support.schemas import validate_response

POLICY = """\
version: 1
baseline_scopes: [mcp:access]
tools:
  echo: {scopes: []}
  slow: {scopes: []}
  search_docs: {scopes: [docs:read]}
  "create_*": {scopes: [tickets:write]}
  "admin_*": {scopes: [admin], clients: [ops-console]}
  crash: {deny: true}
"""
"""Catalog of the fake backend: echo fail slow progress big crash region_lookup search_docs
create_ticket admin_reset unlisted_tool -- several of them deliberately without a rule."""

TOKENS = {
    "basic": principal("bob", "mcp:access"),
    "reader": principal("alice", "mcp:access docs:read"),
    "ops": principal("olga", "mcp:access docs:read tickets:write admin", client_id="ops-console"),
    "admin-elsewhere": principal("eve", "mcp:access admin tickets:write", client_id="cli"),
}

Report = tuple[str, PolicySet | None, list[str]]


class RealChallengeAuthenticator(FakeAuthenticator):
    """The fake token table, with challenges from the real RFC 6750 builder."""

    def __init__(self, reloader: PolicyReloader) -> None:
        super().__init__(TOKENS)
        self._reloader = reloader

    def challenge(self, error: GatewayError) -> str | None:
        return challenge_for(
            error, resource_metadata=PRM_URL, baseline=self._reloader.current().baseline_scopes
        )


@dataclass(slots=True)
class PolicyGateway:
    client: TestClient[web.Request, web.Application]
    reloader: PolicyReloader
    backend: FakeBackend
    policy_file: Path
    reports: list[Report]

    async def list_tools(self, token: str) -> list[str]:
        headers = modern_headers("tools/list", Authorization=f"Bearer {token}")
        response = await self.client.post(
            "/mcp", data=_json(modern_request("tools/list", 2)), headers=headers
        )
        payload = await assert_json_ok(response)
        validate_response(MODERN, payload, "tools/list")
        return [tool["name"] for tool in payload["result"]["tools"]]

    async def call(self, token: str, name: str, **arguments: Any) -> Any:
        body = modern_request("tools/call", 7, {"name": name, "arguments": arguments})
        headers = modern_headers("tools/call", name, Authorization=f"Bearer {token}")
        return await self.client.post("/mcp", data=_json(body), headers=headers)

    def rewrite(self, text: str) -> None:
        """Replace the policy file; move mtime forward so coarse clocks see the change."""
        before = self.policy_file.stat().st_mtime_ns
        self.policy_file.write_text(text, encoding="utf-8")
        os.utime(self.policy_file, ns=(before + 2_000_000_000, before + 2_000_000_000))


def _json(body: Any) -> bytes:
    return json.dumps(body).encode()


@pytest.fixture
async def pgw(aiohttp_server: Any, aiohttp_client: Any, tmp_path: Path) -> PolicyGateway:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(POLICY, encoding="utf-8")
    reports: list[Report] = []
    config = harness_config()
    reloader = PolicyReloader(
        [policy_file],
        issuers=config.issuer_urls,  # as the wiring passes them: plain entries are its names
        on_reload=lambda *report: reports.append(report),
    )
    backend = FakeBackend()
    endpoint = McpEndpoint(
        config=config,
        authenticator=RealChallengeAuthenticator(reloader),
        policy=reloader,
        backend=backend,
        limiter=MemoryRateLimiter(),
    )
    app = web.Application()
    add_mcp_routes(app, endpoint, config=config, prm_document=None)
    server = await aiohttp_server(app, host="127.0.0.1", port=0)
    client = await aiohttp_client(server)
    return PolicyGateway(client, reloader, backend, policy_file, reports)


class TestFilteredListing:
    @pytest.mark.parametrize(
        ("token", "expected"),
        [
            ("basic", ["echo", "slow"]),
            ("reader", ["echo", "search_docs", "slow"]),
            ("ops", ["admin_reset", "create_ticket", "echo", "search_docs", "slow"]),
            ("admin-elsewhere", ["create_ticket", "echo", "slow"]),
        ],
        ids=["baseline only", "docs reader", "ops console", "admin scope from another client"],
    )
    async def test_tools_list_shows_only_the_tools_the_caller_may_call(
        self, pgw: PolicyGateway, token: str, expected: list[str]
    ) -> None:
        assert await pgw.list_tools(token) == expected


class TestStepUp:
    @pytest.mark.row("tool_insufficient_scope")
    async def test_a_tool_needing_more_scopes_is_answered_403_naming_every_scope_it_needs(
        self, pgw: PolicyGateway
    ) -> None:
        response = await pgw.call("reader", "create_ticket", title="x")
        await assert_error(response, 403)
        assert response.headers["WWW-Authenticate"] == (
            'Bearer error="insufficient_scope", error_description="Insufficient scope", '
            f'scope="mcp:access tickets:write", resource_metadata="{PRM_URL}"'
        )
        assert pgw.backend.calls == []

    async def test_after_stepping_up_the_same_call_goes_through(self, pgw: PolicyGateway) -> None:
        payload = await assert_json_ok(await pgw.call("ops", "create_ticket", title="x"))
        assert "result" in payload
        assert len(pgw.backend.calls) == 1
        assert pgw.backend.calls[0].principal.subject == "olga"


class TestHiddenTools:
    @pytest.mark.row("unknown_tool")
    @pytest.mark.parametrize(
        ("token", "tool"),
        [
            ("ops", "no_such_tool"),
            ("ops", "unlisted_tool"),
            ("ops", "crash"),
            ("admin-elsewhere", "admin_reset"),
        ],
        ids=["not in the catalog", "catalog tool without a rule", "deny", "client not allowed"],
    )
    async def test_a_tool_the_caller_may_not_see_is_answered_like_an_unknown_one(
        self, pgw: PolicyGateway, token: str, tool: str
    ) -> None:
        response = await pgw.call(token, tool)
        payload = await assert_error(response, 400, -32602, request_id=7)
        assert "WWW-Authenticate" not in response.headers
        reference = await pgw.call(token, "no_such_tool")
        assert await reference.json() == payload
        assert pgw.backend.calls == []

    @pytest.mark.row("unknown_tool")
    async def test_on_the_legacy_path_a_hidden_tool_is_a_200_unknown_tool_error(
        self, pgw: PolicyGateway
    ) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "admin_reset", "arguments": {}},
        }
        response = await pgw.client.post(
            "/mcp", data=_json(body), headers=legacy_headers(Authorization="Bearer admin-elsewhere")
        )
        await assert_error(response, 200, -32602, request_id=3)
        assert "WWW-Authenticate" not in response.headers


class TestReload:
    async def test_a_valid_reload_takes_effect_without_a_restart(self, pgw: PolicyGateway) -> None:
        assert "create_ticket" not in await pgw.list_tools("reader")
        pgw.rewrite(
            POLICY.replace(
                '"create_*": {scopes: [tickets:write]}', '"create_*": {scopes: [docs:read]}'
            )
        )
        assert pgw.reloader.reload() is True  # what SIGHUP does
        assert [r[0] for r in pgw.reports] == ["success"]
        assert "create_ticket" in await pgw.list_tools("reader")
        await assert_json_ok(await pgw.call("reader", "create_ticket", title="x"))

    async def test_polling_picks_up_a_changed_file(self, pgw: PolicyGateway) -> None:
        task = asyncio.create_task(pgw.reloader.run(0.02))
        try:
            pgw.rewrite(POLICY.replace("  echo: {scopes: []}\n", ""))
            async with asyncio.timeout(5):
                while not pgw.reports:  # noqa: ASYNC110 - reports come from a worker thread
                    await asyncio.sleep(0.01)
            assert await pgw.list_tools("basic") == ["slow"]
            response = await pgw.call("basic", "echo", text="hi")
            await assert_error(response, 400, -32602, request_id=7)
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    async def test_a_broken_reload_keeps_the_old_policy_and_reports_the_line(
        self, pgw: PolicyGateway
    ) -> None:
        before = pgw.reloader.current().version
        pgw.rewrite(POLICY.replace("  echo: {scopes: []}\n", "  echo: {scopes: [], oops: 1}\n"))
        assert pgw.reloader.reload() is False
        assert pgw.reports == [
            ("failure", None, [f"{pgw.policy_file}:4:22: tools.echo.oops: unknown key"])
        ]
        assert pgw.reloader.current().version == before
        assert await pgw.list_tools("basic") == ["echo", "slow"]

    async def test_a_request_in_flight_finishes_under_the_policy_it_started_with(
        self, pgw: PolicyGateway
    ) -> None:
        task = asyncio.create_task(pgw.call("basic", "slow", seconds=10))
        async with asyncio.timeout(5):
            while not pgw.backend.calls:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        pgw.rewrite(POLICY.replace("  slow: {scopes: []}\n", ""))
        assert pgw.reloader.reload() is True
        pgw.backend.release.set()
        await assert_json_ok(await task)
        # The next request sees the new policy: slow is gone.
        await assert_error(await pgw.call("basic", "slow", seconds=0), 400, -32602, request_id=7)
