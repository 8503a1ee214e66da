"""CORS in a real browser: Debian's Chromium, driven by playwright, calls the production gateway.

A page served by the test from an allowed origin lists and calls tools with plain ``fetch`` and a
bearer token (a 2026-07-28 client: the mirrored ``Mcp-*`` headers and an ``Mcp-Param-*`` header
make every call preflighted), reads the 401 challenge through the exposed ``WWW-Authenticate``,
and the same page from an origin off the list gets nothing (``fetch`` rejects). The browser:
:mod:`tests.support.chromium` (the system's; playwright never downloads one).
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.support.chromium import needs_chromium
from tests.support.live_stack import MODERN, MakeStack, ServerFactory
from tests.support.policy import policy_text
from tests.support.upstreams import ModernUpstream, echo_tool

POLICY = policy_text(tools={"echo": "tools:echo", "regional": "tools:echo"})

REGIONAL = echo_tool("regional")
REGIONAL["inputSchema"]["properties"]["region"] = {"type": "string", "x-mcp-header": "Region"}

PAGE = """<!doctype html>
<meta charset="utf-8">
<title>browser MCP client</title>
<script>
const META = {
  "io.modelcontextprotocol/protocolVersion": "%(modern)s",
  "io.modelcontextprotocol/clientCapabilities": {},
  "io.modelcontextprotocol/clientInfo": {name: "browser-page", version: "1"},
};
let nextId = 1;
async function mcp(url, token, method, params, extra) {
  const headers = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "%(modern)s",
    "Mcp-Method": method,
    ...(extra || {}),
  };
  if (params && params.name) headers["Mcp-Name"] = params.name;
  if (token) headers["Authorization"] = "Bearer " + token;
  const body = {jsonrpc: "2.0", id: nextId++, method, params: {...(params || {}), _meta: META}};
  try {
    const response = await fetch(url, {method: "POST", headers, body: JSON.stringify(body)});
    return {
      status: response.status,
      challenge: response.headers.get("WWW-Authenticate"),
      requestId: response.headers.get("X-Request-Id"),
      body: await response.text(),
    };
  } catch (error) {
    return {error: error.name};
  }
}
</script>
"""


pytestmark = needs_chromium


async def _page_server(aiohttp_server: ServerFactory) -> str:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE % {"modern": MODERN}, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    server = await aiohttp_server(app, host="127.0.0.1")
    return f"http://127.0.0.1:{server.port}"


async def test_a_browser_page_calls_tools_from_an_allowed_origin_only(
    aiohttp_server: ServerFactory,
    make_stack: MakeStack,
    browser: Any,
) -> None:
    allowed = await _page_server(aiohttp_server)
    other = await _page_server(aiohttp_server)  # another port: another origin
    upstream = ModernUpstream(tools=[echo_tool("echo"), REGIONAL])
    async with make_stack(
        upstream=upstream,
        policy=POLICY,
        gateway={"cors": {"enabled": True, "max_age_s": 60}, "allowed_origins": [allowed]},
    ) as stack:
        url = stack.server.mcp_url
        token = stack.token()
        page = await browser.new_page()
        await page.goto(allowed + "/")

        async def run(method: str, params: Any = None, token: str | None = token, **extra: str):
            result: dict[str, Any] = await page.evaluate(
                "([url, token, method, params, extra]) => mcp(url, token, method, params, extra)",
                [url, token, method, params, extra],
            )
            return result

        listed = await run("tools/list")
        assert listed["status"] == 200, listed
        names = [tool["name"] for tool in json.loads(listed["body"])["result"]["tools"]]
        assert names == ["echo", "regional"]
        assert listed["requestId"]  # exposed

        called = await run("tools/call", {"name": "echo", "arguments": {"text": "from a page"}})
        assert called["status"] == 200, called
        result = json.loads(called["body"])["result"]
        assert result["structuredContent"] == {"echo": {"text": "from a page"}}

        # An Mcp-Param-* header (x-mcp-header): the preflight must allow the name the page asks.
        regional = await run(
            "tools/call",
            {"name": "regional", "arguments": {"region": "us-west1"}},
            **{"Mcp-Param-Region": "us-west1"},
        )
        assert regional["status"] == 200, regional
        assert upstream.requests[-1].headers.get("Mcp-Param-Region") == "us-west1"

        challenge = await run("tools/list", token=None)
        assert challenge["status"] == 401
        assert challenge["challenge"] is not None
        assert challenge["challenge"].startswith("Bearer ")
        assert f'resource_metadata="{stack.config.prm_url}"' in challenge["challenge"]

        # The same page from an origin off the list: the browser hands it nothing.
        await page.goto(other + "/")
        refused = await run("tools/list")
        assert refused == {"error": "TypeError"}
        refused = await run("tools/list", token=None)
        assert refused == {"error": "TypeError"}
