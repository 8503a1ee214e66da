"""Every answer names the product alone in ``Server``, never the Python or aiohttp version.

Issue 32 item 7: aiohttp's default ``Server: Python/3.11 aiohttp/3.14.5`` went out on every
answer of both listeners, telling a scanner which versions to try. The production wiring
(:func:`tests.support.live_stack.live_stack`) on real sockets: the MCP path's one-write answers,
an SSE stream prepared by its handler, aiohttp's own path (metadata, 404, 405), the ops
listener, and the listeners' own answers to malformed HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway import SERVER_PRODUCT
from tests.support.live_stack import MakeStack
from tests.support.raw_http import exchange
from tests.support.upstreams import LegacyUpstream

MALFORMED = b"P@ST /mcp HTTP/1.1\r\nHost: x\r\n\r\n"


def assert_product(headers: Mapping[str, str], where: str) -> None:
    values = [v for k, v in headers.items() if k.lower() == "server"]
    assert values == [SERVER_PRODUCT], (where, values)


async def test_every_answer_of_both_listeners_names_only_the_product(make_stack: MakeStack) -> None:
    assert SERVER_PRODUCT == "mcp-gateway"
    async with make_stack(upstream=LegacyUpstream()) as stack:
        token = stack.token()
        seen: list[str] = []

        status, headers, _ = await stack.call(token, "echo", {"text": "hi"})
        assert status == 200
        assert_product(headers, "tools/call (one write)")
        status, headers, _ = await stack.post(None, {"jsonrpc": "2.0", "id": 1, "method": "x"})
        assert status == 401
        assert_product(headers, "401")

        status, headers, _ = await stack.call(
            token, "echo", {"text": "p", "steps": 2}, rid=9, progressToken="p-1"
        )
        assert (status, headers["Content-Type"]) == (200, "text/event-stream")
        assert_product(headers, "SSE stream")

        public = f"http://127.0.0.1:{stack.server.public_port}"
        for method, url in [
            ("GET", public + "/.well-known/oauth-protected-resource/mcp"),
            ("GET", public + "/nowhere"),
            ("GET", public + "/mcp"),
            ("GET", stack.server.ops_url + "/healthz"),
            ("GET", stack.server.ops_url + "/readyz"),
            ("GET", stack.server.ops_url + "/metrics"),
            ("GET", stack.server.ops_url + "/nowhere"),
        ]:
            async with stack.session.request(method, url) as response:
                await response.read()
                assert_product(response.headers, url)
                seen.append(f"{response.status} {url}")
        assert [line.split()[0] for line in seen] == [
            "200",
            "404",
            "405",
            "200",
            "200",
            "200",
            "404",
        ]

        for port in (stack.server.public_port, stack.server.ops_port):
            response = await exchange(port, MALFORMED)
            assert response.status == 400
            assert response.headers.getall("Server") == [SERVER_PRODUCT]
