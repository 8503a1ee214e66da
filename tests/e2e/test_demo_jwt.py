"""End to end: ``mcp-gateway demo --tokens jwt``, an issuer with JWT access tokens and no
introspection endpoint (the Microsoft Entra ID shape), with the official SDK, a full OAuth flow
and the command line as a user runs it.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from gateway.demo.stack import DemoStack, start_demo, wait_ready
from gateway.errors import FORBIDDEN_CODE
from tests.e2e.test_demo_command import _demo_ports, running_demo
from tests.support.demo_stack import READER_TOOLS, modern_body, modern_headers
from tests.support.dev_http import http_client
from tests.support.oauth_flow import (
    code_flow,
)
from tests.support.sdk_stack import sdk_session


@pytest.fixture
async def jwt_demo() -> AsyncIterator[DemoStack]:
    stack = await start_demo(port=0, cache_max_ttl_s=1, tokens="jwt")
    try:
        assert await wait_ready(stack, timeout_s=15), "the JWT demo never became ready"
        yield stack
    finally:
        await stack.stop()


def jose_header(token: str) -> dict[str, Any]:
    segment = token.split(".", maxsplit=1)[0]
    header: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    )
    return header


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_works_with_a_jwt_and_the_issuer_is_never_asked(
    jwt_demo: DemoStack, mode: str
) -> None:
    token = jwt_demo.tokens["reader"]
    assert jose_header(token)["typ"] == "at+jwt"
    assert "introspection_endpoint" not in jwt_demo.issuer.metadata()
    async with sdk_session(jwt_demo.mcp_url, token, mode) as client:
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == READER_TOOLS
        result = await client.call_tool("echo", {"text": "signed, not introspected"})
        assert result.is_error is False
        with pytest.raises(MCPError) as refused:
            await client.call_tool("notes_add", {"text": "a reader may not write"})
        assert refused.value.error.code == FORBIDDEN_CODE
    assert jwt_demo.issuer.introspection_calls == 0
    assert not jwt_demo.backend.saw(token)


async def test_an_oauth_client_gets_a_jwt_that_works_and_its_refresh_token_does_not(
    jwt_demo: DemoStack,
) -> None:
    async with http_client() as http:
        metadata = await (
            await http.get(f"{jwt_demo.issuer_url}/.well-known/oauth-authorization-server")
        ).json()
        assert metadata["jwks_uri"] == f"{jwt_demo.issuer_url}/jwks"
        flow = await code_flow(
            http, metadata, resource=jwt_demo.mcp_url, token_resource=jwt_demo.mcp_url
        )
        assert flow.status == 200, flow.token
        token = flow.token
        assert jose_header(token["access_token"])["typ"] == "at+jwt"
        listed = await http.post(
            jwt_demo.mcp_url,
            json=modern_body("tools/list"),
            headers=modern_headers(token["access_token"], "tools/list"),
        )
        assert listed.status == 200
        refresh = await http.post(
            jwt_demo.mcp_url,
            json=modern_body("tools/list"),
            headers=modern_headers(token["refresh_token"], "tools/list"),
        )
        assert refresh.status == 401
        assert 'error="invalid_token"' in refresh.headers["WWW-Authenticate"]
    assert jwt_demo.issuer.introspection_calls == 0


async def test_the_demo_command_runs_in_jwt_mode(tmp_path: Path) -> None:
    state_file = tmp_path / "demo-state.json"
    command = [sys.executable, "-m", "gateway.commands", "demo"]
    with running_demo(
        state_file, *_demo_ports(), "--tokens", "jwt", "--log-level", "warning"
    ) as run:
        state = run.state
        assert state["auth_mode"] == "jwt"
        tokens = state["tokens"]
        assert isinstance(tokens, dict)
        minted = subprocess.run(  # noqa: ASYNC221 - a short CLI call
            [
                *command,
                "token",
                "--scopes",
                "mcp:access notes:read",
                "--state-file",
                str(state_file),
            ],
            capture_output=True,
            timeout=30,
            check=False,
        )
        assert minted.returncode == 0, minted.stderr
        async with http_client() as http:
            for token in (str(tokens["reader"]), minted.stdout.decode().strip()):
                assert jose_header(token)["typ"] == "at+jwt"
                reply = await http.post(
                    str(state["mcp_url"]),
                    json=modern_body("tools/list"),
                    headers=modern_headers(token, "tools/list"),
                )
                assert reply.status == 200
    assert "JWT access tokens (RFC 9068) validated locally" in run.stdout
