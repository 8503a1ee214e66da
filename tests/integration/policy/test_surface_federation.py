"""Prompts and resources of several backends behind one endpoint (two SDK ``MCPServer``s).

Prompts carry the backend prefix like tools; resource URIs and templates are exposed as
``mcp-gw://<backend>/<the backend's URI>``, so a read is routed by the URI alone (on any
replica: no state) and the backend sees its own URI; a ``resource_link`` a tool returns is
rewritten the same way and can be read back; a backend that answers with URIs already in the
gateway's form is refused; merged lists page with the opaque cursors.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live_stack import LiveStack, MakeStack, ServerFactory
from tests.support.policy import policy_text
from tests.support.sdk_stack import backend_settings, federated_sdk_stack
from tests.support.sdk_upstream import SdkUpstream, sdk_upstream

POLICY = policy_text(
    tools={"*": ""},
    prompts={"docs__*": "", "wiki__greet": ""},
    resources={"mcp-gw://docs/docs://guide/**": "", "mcp-gw://wiki/**": "wiki:read"},
)


@pytest.fixture
async def fed(
    tmp_path: Path, aiohttp_server: ServerFactory, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[LiveStack, SdkUpstream, SdkUpstream]]:
    async with federated_sdk_stack(
        tmp_path, aiohttp_server, monkeypatch, policy=POLICY, gateway={"protocol": {"page_size": 2}}
    ) as (live, docs, wiki):
        yield live, docs, wiki


async def pages(live: LiveStack, token: str, method: str, member: str) -> list[Any]:
    found: list[Any] = []
    cursor = None
    for _ in range(20):
        status, _, text = await live.modern(token, method, {"cursor": cursor} if cursor else {})
        assert status == 200, text
        result = json.loads(text)["result"]
        found += result[member]
        cursor = result.get("nextCursor")
        if cursor is None:
            return found
    raise AssertionError("the listing never ended")


async def test_prompts_are_prefixed_and_uris_name_their_backend(
    fed: tuple[LiveStack, SdkUpstream, SdkUpstream],
) -> None:
    live, docs, wiki = fed
    token = live.token("mcp:access wiki:read")
    prompts = await pages(live, token, "prompts/list", "prompts")
    assert [p["name"] for p in prompts] == ["docs__greet", "docs__secret_plan", "wiki__greet"]
    resources = await pages(live, token, "resources/list", "resources")
    assert [r["uri"] for r in resources] == [
        "mcp-gw://docs/docs://guide/intro",
        "mcp-gw://docs/docs://guide/logo.png",
        "mcp-gw://wiki/docs://guide/intro",
        "mcp-gw://wiki/docs://guide/logo.png",
        "mcp-gw://wiki/docs://private/keys",
    ]
    templates = await pages(live, token, "resources/templates/list", "resourceTemplates")
    assert [t["uriTemplate"] for t in templates] == [
        "mcp-gw://docs/docs://guide/{page}",
        "mcp-gw://wiki/docs://guide/{page}",
    ]
    # A read is routed by the URI alone; each backend sees its own URI.
    for uri, upstream in (
        ("mcp-gw://wiki/docs://private/keys", wiki),
        ("mcp-gw://docs/docs://guide/usage", docs),
    ):
        before = upstream.count("resources/read")
        status, _, text = await live.modern(token, "resources/read", {"uri": uri}, name=uri)
        assert status == 200, text
        contents = json.loads(text)["result"]["contents"]
        assert contents[0]["uri"] == uri  # the answer names the exposed URI again
        assert upstream.count("resources/read") == before + 1
    status, _, text = await live.modern(
        token,
        "prompts/get",
        {"name": "wiki__greet", "arguments": {"name": "W"}},
        name="wiki__greet",
    )
    assert status == 200 and wiki.count("prompts/get") == 1 and docs.count("prompts/get") == 0
    # Completion against a rewritten template reaches its backend with the backend's template.
    status, _, text = await live.modern(
        token,
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "mcp-gw://wiki/docs://guide/{page}"},
            "argument": {"name": "page", "value": "u"},
        },
    )
    assert status == 200 and json.loads(text)["result"]["completion"]["values"] == ["usage"]


async def test_a_uri_not_in_the_gateways_form_or_of_an_unknown_backend_is_not_found(
    fed: tuple[LiveStack, SdkUpstream, SdkUpstream],
) -> None:
    live, docs, wiki = fed
    token = live.token("mcp:access wiki:read")
    for uri in ("docs://guide/intro", "mcp-gw://nobody/docs://guide/intro", "mcp-gw://docs/"):
        status, _, text = await live.modern(token, "resources/read", {"uri": uri}, name=uri)
        assert status == 400, uri
        assert json.loads(text)["error"] == {"code": -32602, "message": "Resource not found"}
    # The policy's scheme and authority are literal: docs' rule never covers wiki's URIs.
    status, _, _ = await live.modern(
        live.token("mcp:access"),
        "resources/read",
        {"uri": "mcp-gw://wiki/docs://guide/intro"},
        name="mcp-gw://wiki/docs://guide/intro",
    )
    assert status == 403
    assert docs.count("resources/read") == wiki.count("resources/read") == 0


async def test_a_resource_link_a_tool_returns_is_rewritten_and_readable(
    fed: tuple[LiveStack, SdkUpstream, SdkUpstream],
) -> None:
    live, _, wiki = fed
    token = live.token("mcp:access wiki:read")
    status, _, text = await live.call(token, "wiki__link", {})
    assert status == 200, text
    content = json.loads(text)["result"]["content"]
    link = next(block for block in content if block["type"] == "resource_link")
    embedded = next(block for block in content if block["type"] == "resource")
    assert link["uri"] == embedded["resource"]["uri"] == "mcp-gw://wiki/docs://guide/intro"
    status, _, text = await live.modern(
        token, "resources/read", {"uri": link["uri"]}, name=link["uri"]
    )
    assert status == 200
    assert json.loads(text)["result"]["contents"][0]["text"] == "# Introduction"
    assert wiki.count("resources/read") == 1


async def test_a_backend_answering_with_another_backends_uris_is_refused(
    make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SURFACE_DOCS", "docs-service-token")
    monkeypatch.setenv("SURFACE_WIKI", "wiki-service-token")
    async with (
        sdk_upstream(surface=True) as docs,
        sdk_upstream(surface=True, rogue=True) as rogue,
        make_stack(
            policy=POLICY.replace("wiki", "rogue"),
            backends={
                "docs": backend_settings(docs.url, "SURFACE_DOCS"),
                "rogue": backend_settings(rogue.url, "SURFACE_WIKI"),
            },
        ) as live,
    ):
        token = live.token("mcp:access rogue:read")
        resources = await pages(live, token, "resources/list", "resources")
        uris = [r["uri"] for r in resources]
        assert "mcp-gw://rogue/mcp-gw://other/docs://x" not in uris
        assert "mcp-gw://rogue/docs://guide/intro" in uris
        status, _, text = await live.call(token, "rogue__link", {})
        result = json.loads(text)["result"]
        assert status == 200 and result["isError"] is True
        assert result["content"] == [{"type": "text", "text": "Upstream tool failed"}]
