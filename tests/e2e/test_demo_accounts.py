"""End to end: the demo's third backend acts with each person's own account (issue 45, "The
demo shows it"). ``mcp-gateway demo`` runs an accounts service that takes only tokens its own
authorization server (a second development issuer, with the people ``ann`` and ``ben``) issued,
behind ``accounts__``: a new person's first call asks them to connect, they do in a browser,
and the call goes through as their account there."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import aiohttp

from gateway.demo.stack import DemoStack
from tests.support.login_stack import HttpBrowser, authorize, hidden_fields
from tests.support.mcp_client import McpAt

CONSENT_KEY = "mcp-gateway/connect"


async def test_a_new_person_connects_their_account_and_calls_the_tool_as_it(
    demo_stack: DemoStack,
) -> None:
    token = demo_stack.tokens["reader"]
    async with McpAt(demo_stack.mcp_url) as client, aiohttp.ClientSession() as session:
        _, _, text = await client.call(
            token, "accounts__whoami", capabilities={"elicitation": {"url": {}}}
        )
        first = json.loads(text)["result"]
        link = first["inputRequests"][CONSENT_KEY]["params"]["url"]
        origin = f"{urlsplit(link).scheme}://{urlsplit(link).netloc}"
        browser = HttpBrowser(session, origin)
        status, headers, _ = await browser.get(link)  # sign in at the demo's issuer first
        assert status == 303
        _, headers, _ = await browser.get(origin + headers["Location"])
        answer = await authorize(browser, headers["Location"], "demo-reader")
        _, headers, _ = await browser.get(answer)
        assert headers["Location"] == urlsplit(link).path
        _, _, page = await browser.get(link)
        assert "accounts" in page
        status, headers, _ = await browser.post(link, {"csrf": hidden_fields(page)["csrf"]})
        assert status == 303 and demo_stack.accounts_issuer is not None
        assert headers["Location"].startswith(demo_stack.accounts_issuer.url)
        answer = await authorize(browser, headers["Location"], "ben")  # the service's people
        status, _, page = await browser.get(answer)
        assert status == 200 and "is connected" in page
        _, _, text = await client.modern(
            token,
            "tools/call",
            {
                "name": "accounts__whoami",
                "arguments": {},
                "requestState": first["requestState"],
                "inputResponses": {CONSENT_KEY: {"action": "accept"}},
            },
            capabilities={"elicitation": {"url": {}}},
        )
    result = json.loads(text)["result"]
    assert result["structuredContent"]["sub"] == "ben"
