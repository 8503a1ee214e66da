"""``mcp-gateway serve`` takes no MCP connection before it is ready.

A proxy without health checks (Debian nginx's upstream block) sends a restarted replica
requests as soon as its port accepts; bound before its first catalog, the replica answered
``tools/call`` with "unknown tool" (400) and ``tools/list`` with an empty list. Now the public
listener binds once the readiness checks pass (at most ``PUBLIC_READY_WAIT_S`` after the start,
as the workers of ``serve --workers N`` always did): until then a connection is refused, which a
proxy retries on another replica, and the first call it takes is answered from the catalog.
"""

from __future__ import annotations

import sys
from pathlib import Path

import aiohttp
import pytest

from tests.support.live_stack import ServerFactory
from tests.support.mcp_client import modern_body, modern_headers
from tests.support.serve_process import served_gateway
from tests.support.upstreams import ModernUpstream

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

POLICY = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  echo: {scopes: []}\n"


async def call_echo(session: aiohttp.ClientSession, mcp_url: str, token: str) -> dict[str, object]:
    body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    headers = modern_headers(token, "tools/call", "echo")
    async with session.post(mcp_url, json=body, headers=headers) as response:
        assert response.status == 200, await response.text()
        answer: dict[str, object] = await response.json()
        return answer


async def test_the_public_listener_binds_only_once_the_first_catalog_is_in(
    tmp_path: Path, aiohttp_server: ServerFactory
) -> None:
    upstream = ModernUpstream(fault="list_fails")  # no catalog yet: not ready
    upstream_server = await aiohttp_server(upstream.app())
    backend_url = str(upstream_server.make_url("/mcp"))
    async with (
        served_gateway(tmp_path, backend_url, policy=POLICY, audit={"sink": "off"}) as served,
        aiohttp.ClientSession() as session,
    ):
        gw, mcp_url, token = served.gw, served.mcp_url, served.token("erin")
        # The ops listener is up (and says not ready) while the public port refuses.
        await gw.wait_for("backend_catalog_refresh_failed", 15)
        async with session.get(served.ops_url + "/readyz") as response:
            assert response.status == 503
        with pytest.raises(aiohttp.ClientConnectionError):
            await call_echo(session, mcp_url, token)
        assert gw.event("gateway.started") is None

        upstream.fault = None  # the next catalog refresh succeeds
        started = await gw.wait_for("gateway.started", 15)
        assert started["mcp_url"] == mcp_url
        answer = await call_echo(session, mcp_url, token)
        assert "error" not in answer and answer["result"]["isError"] is False  # type: ignore[index]
