"""The login surface's budget per client address (``login.pre_auth_rate``), through HTTP: every
request under the prefix counts (pages, unknown paths, the connect API of ``mcp-gateway
connect``), by the client's address behind a trusted proxy (``X-Forwarded-For``; IPv6 per /64),
apart from the MCP endpoint's own budget; at the limit a request is served, just past it the
answer is the ``login_rate_limited`` row (429, ``Retry-After``, the surface's headers), counted
and not audited."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest

from gateway.commands.cli import main
from gateway.login.pages import SECURITY_HEADERS
from tests.support.live_stack import MakeStack
from tests.support.login_stack import LOGIN_CLIENT
from tests.support.user_oauth_stack import UserOAuthStack, user_oauth_stack

BUDGET: Final = 6
"""Requests per hour and address (an hour: no window boundary falls inside a test)."""
MESSAGE: Final = "Too many requests from your address; try again in a moment."


@pytest.fixture
async def stack(tmp_path: Path, make_stack: MakeStack) -> AsyncIterator[UserOAuthStack]:
    more = {
        "login": {
            "client_id": LOGIN_CLIENT,
            "client_secret": {"env": "LOGIN_CLIENT_SECRET"},
            "pre_auth_rate": f"{BUDGET}/hour",
        },
        "trusted_proxies": ["127.0.0.1/32"],  # the test's requests come as from a proxy
        "audit": {"sink": "file", "path": str(tmp_path / "audit.jsonl")},
    }
    async with make_stack.of(user_oauth_stack, gateway=more) as running:
        yield running


async def ask(
    stack: UserOAuthStack, method: str, path: str, client: str, **kwargs: Any
) -> tuple[int, dict[str, str], str]:
    """One request to the surface as from ``client`` (behind the trusted proxy)."""
    headers = {"X-Forwarded-For": client, **kwargs.pop("headers", {})}
    async with stack.stack.session.request(
        method, stack.login.url(path), headers=headers, allow_redirects=False, **kwargs
    ) as response:
        return response.status, dict(response.headers), await response.text()


async def metrics(stack: UserOAuthStack) -> str:
    async with stack.stack.session.get(stack.stack.server.ops_url + "/metrics") as response:
        return await response.text()


def assert_limited(answer: tuple[int, dict[str, str], str]) -> None:
    status, headers, page = answer
    assert status == 429, (status, page[:300])
    assert int(headers["Retry-After"]) >= 1
    for name, value in SECURITY_HEADERS.items():
        assert headers[name] == value, name
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert MESSAGE in page


@pytest.mark.row("login_rate_limited")
async def test_every_path_counts_the_last_request_of_the_budget_passes_the_next_is_429(
    stack: UserOAuthStack, tmp_path: Path
) -> None:
    client = "203.0.113.7"
    bearer = {"Authorization": f"Bearer {stack.token('alice')}"}
    served = [
        await ask(stack, "GET", "/account", client),  # to the sign-in
        await ask(stack, "GET", "/login?next=/gateway/account", client),  # to the issuer
        await ask(stack, "GET", "/no-such-page", client),
        await ask(stack, "POST", "/connections/api/accounts", client, json={}),  # no token
        await ask(stack, "GET", "/", client),
        # The last one of the budget: served (the connect API answers the person's state).
        await ask(stack, "POST", "/connections/api/accounts", client, json={}, headers=bearer),
    ]
    assert [status for status, _, _ in served] == [303, 303, 404, 401, 303, 200]
    assert json.loads(served[-1][2]) == {"backend": "accounts", "state": "missing"}
    # Just past it: refused before anything else, a page and the connect API alike.
    assert_limited(await ask(stack, "GET", "/account", client))
    limited_api = await ask(
        stack, "POST", "/connections/api/accounts", client, json={"link": True}, headers=bearer
    )
    assert_limited(limited_api)
    assert "url" not in limited_api[2] and "/connect/" not in limited_api[2]  # no link made
    # Another address has its own budget; so has the MCP endpoint for this one.
    status, _, _ = await ask(stack, "GET", "/account", "203.0.113.8")
    assert status == 303
    call = await stack.stack.call(
        stack.token("alice"), "accounts__whoami", headers={"X-Forwarded-For": client}
    )
    assert call[0] == 200
    exposition = await metrics(stack)
    assert 'mcp_gateway_rate_limited_total{scope="login"} 2.0' in exposition
    assert 'mcp_gateway_rejections_total{row="login_rate_limited"} 2.0' in exposition
    path = tmp_path / "audit.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    assert not [e for e in events if e.get("row") == "login_rate_limited"]  # counted, not audited


@pytest.mark.row("login_rate_limited")
async def test_ipv6_clients_share_the_budget_of_their_64(stack: UserOAuthStack) -> None:
    for index in range(BUDGET):
        status, _, _ = await ask(stack, "GET", "/account", f"2001:db8:5:7::{index + 1:x}")
        assert status == 303
    assert_limited(await ask(stack, "GET", "/account", "2001:db8:5:7:ffff::1"))
    status, _, _ = await ask(stack, "GET", "/account", "2001:db8:5:8::1")  # another /64
    assert status == 303


@pytest.mark.row("login_rate_limited")
async def test_mcp_gateway_connect_says_the_address_is_over_its_budget(
    stack: UserOAuthStack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(BUDGET):  # the command's own address (loopback, no proxy in between)
        status, _, _ = await ask(stack, "GET", "/account", "127.0.0.1")
        assert status == 303
    token_file = tmp_path / "token"
    token_file.write_text(stack.token("carol"))
    argv = ["connect", "accounts", "--url", stack.stack.mcp_url, "--token-file", str(token_file)]
    code = await asyncio.to_thread(main, argv)
    err = capsys.readouterr().err
    assert code == 1 and "429: too many requests from this address" in err
