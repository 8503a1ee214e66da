"""Prompts, resources and completions through the real HTTP surface, under the policy.

The backend is the official SDK's ``MCPServer`` (:mod:`tests.support.sdk_upstream`, prompts,
text and blob resources, a template, completion), the issuer the dev issuer, the client the
official SDK (both eras) or raw HTTP where the exact bytes matter: listing filtered by policy,
hidden = absent byte for byte, step-up 403 for ``prompts/get`` and ``resources/read``, the
capabilities of ``server/discover`` / ``initialize``, the 2026 caching members, audit and
metrics, and the client's token reaching neither the backend nor logs.
"""

from __future__ import annotations

import base64
import json

import pytest
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference

from gateway.errors import FORBIDDEN_CODE
from tests.support.live_stack import LiveStack, MakeStack
from tests.support.mcp_client import legacy_initialize_body
from tests.support.policy import policy_text
from tests.support.sdk_stack import sdk_client, sdk_stack, sdk_stack_fixture
from tests.support.sdk_upstream import LOGO, SdkUpstream

POLICY = policy_text(
    tools={"echo": ""},
    prompts={"greet": "", "secret_plan": "plans:read"},
    resources={"docs://guide/**": "docs:read", "docs://private/**": "docs:admin"},
)

MODES = pytest.mark.parametrize(
    ("mode", "version"),
    [("auto", "2026-07-28"), ("legacy", "2025-11-25")],
    ids=["modern", "legacy"],
)


stack = sdk_stack_fixture(POLICY, {"audit": {"sink": "stdout"}})


@MODES
async def test_the_sdk_lists_reads_gets_and_completes_what_the_policy_allows(
    stack: tuple[LiveStack, SdkUpstream], mode: str, version: str
) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read")
    http, client = sdk_client(live, token, mode)
    async with http, client:
        assert client.session.protocol_version == version
        prompts = await client.list_prompts()
        assert [p.name for p in prompts.prompts] == ["greet"]
        assert [(a.name, a.required) for a in prompts.prompts[0].arguments or []] == [
            ("name", True),
            ("style", None),
        ]
        got = await client.get_prompt("greet", {"name": "Ada"})
        assert got.messages[0].content.text == "Hello, Ada! (plain)"  # type: ignore[union-attr]
        resources = await client.list_resources()
        assert sorted(str(r.uri) for r in resources.resources) == [
            "docs://guide/intro",
            "docs://guide/logo.png",
        ]
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["docs://guide/{page}"]
        text = await client.read_resource("docs://guide/intro")
        assert text.contents[0].text == "# Introduction"  # type: ignore[union-attr]
        blob = await client.read_resource("docs://guide/logo.png")
        assert base64.b64decode(blob.contents[0].blob) == LOGO  # type: ignore[union-attr]
        assert blob.contents[0].mime_type == "image/png"
        page = await client.read_resource("docs://guide/usage")
        assert page.contents[0].text == "# Page usage"  # type: ignore[union-attr]
        done = await client.complete(
            ResourceTemplateReference(type="ref/resource", uri="docs://guide/{page}"),
            {"name": "page", "value": "in"},
        )
        assert done.completion.values == ["intro", "install", "internals"]
        names = await client.complete(
            PromptReference(type="ref/prompt", name="greet"), {"name": "name", "value": "a"}
        )
        assert names.completion.values == ["alice"]
    assert sdk.count("prompts/get") == 1 and sdk.count("resources/read") == 3
    assert sdk.count("completion/complete") == 2


@MODES
async def test_step_up_for_a_prompt_and_a_resource_is_the_tools_403(
    stack: tuple[LiveStack, SdkUpstream], mode: str, version: str
) -> None:
    live, sdk = stack
    http, client = sdk_client(live, live.token("mcp:access docs:read"), mode)
    async with http, client:
        with pytest.raises(MCPError) as prompt:
            await client.get_prompt("secret_plan")
        with pytest.raises(MCPError) as resource:
            await client.read_resource("docs://private/keys")
    assert str(prompt.value) == "Insufficient scope: requires plans:read"
    assert str(resource.value) == "Insufficient scope: requires docs:admin"
    assert prompt.value.error.code == resource.value.error.code == FORBIDDEN_CODE
    assert sdk.count("prompts/get") == 0 and sdk.count("resources/read") == 0


@pytest.mark.row("tool_insufficient_scope")
async def test_the_step_up_403_carries_the_challenge_in_both_eras(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, _ = stack
    token = live.token("mcp:access")
    status, headers, text = await live.modern(
        token, "resources/read", {"uri": "docs://guide/intro"}, name="docs://guide/intro"
    )
    assert status == 403
    assert 'error="insufficient_scope"' in headers["WWW-Authenticate"]
    assert 'scope="mcp:access docs:read"' in headers["WWW-Authenticate"]
    body = json.loads(text)
    assert body["error"]["code"] == FORBIDDEN_CODE and body["id"] == 1
    assert body["error"]["data"]["required_scopes"] == ["mcp:access", "docs:read"]
    legacy = {"MCP-Protocol-Version": "2025-06-18"}
    status, headers, text = await live.post(
        token,
        {"jsonrpc": "2.0", "id": 7, "method": "prompts/get", "params": {"name": "secret_plan"}},
        legacy,
    )
    assert status == 403
    assert 'scope="mcp:access plans:read"' in headers["WWW-Authenticate"]
    assert json.loads(text)["id"] == 7


@pytest.mark.row("unknown_prompt")
async def test_a_hidden_prompt_is_byte_identical_to_an_absent_one(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read")  # no rule: "nonexistent"; hidden: none here
    answers = []
    for name in ("nonexistent", "greet_x", "other"):
        answers.append(await live.modern(token, "prompts/get", {"name": name}, name=name))
    statuses = {a[0] for a in answers}
    bodies = {a[2] for a in answers}
    assert statuses == {400} and len(bodies) == 1
    assert json.loads(next(iter(bodies)))["error"] == {"code": -32602, "message": "Unknown prompt"}
    # A prompt the backend has but no rule governs would be the same: write one and compare.
    legacy = await live.post(
        token,
        {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "nonexistent"}},
        {"MCP-Protocol-Version": "2025-06-18"},
    )
    assert legacy[0] == 200 and legacy[2] == next(iter(bodies))
    assert sdk.count("prompts/get") == 0


@pytest.mark.row("resource_not_found")
async def test_a_hidden_resource_is_byte_identical_to_an_absent_one_modern(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, sdk = stack
    token = live.token("mcp:access docs:read")
    hidden = await live.modern(
        token, "resources/read", {"uri": "docs://secret/x"}, name="docs://secret/x"
    )
    absent = await live.modern(
        token, "resources/read", {"uri": "docs://guide/a/b"}, name="docs://guide/a/b"
    )
    dodges = [
        await live.modern(token, "resources/read", {"uri": uri}, name=uri)
        for uri in ("docs://private/x/%2e%2e/keys", "DOCS://Private/keys")
    ]
    assert hidden[0] == absent[0] == 400
    assert hidden[2] == absent[2]
    assert json.loads(hidden[2])["error"] == {"code": -32602, "message": "Resource not found"}
    # An encoded dot segment or a mixed-case host still meets the private rule: a step-up.
    assert [answer[0] for answer in dodges] == [403, 403]
    assert sdk.count("resources/read") == 1  # only the absent one was asked


@pytest.mark.row("legacy_resource_not_found")
async def test_a_hidden_resource_is_byte_identical_to_an_absent_one_legacy(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, _ = stack
    token = live.token("mcp:access docs:read")
    headers = {"MCP-Protocol-Version": "2025-06-18"}
    answers = [
        await live.post(
            token,
            {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": uri}},
            headers,
        )
        for uri in ("docs://secret/x", "docs://guide/a/b")
    ]
    assert answers[0][0] == answers[1][0] == 200
    assert answers[0][2] == answers[1][2]
    assert json.loads(answers[0][2])["error"] == {"code": -32002, "message": "Resource not found"}


async def test_discover_and_initialize_advertise_only_what_the_caller_can_use(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, _ = stack
    status, _, text = await live.modern(live.token("mcp:access docs:read"), "server/discover")
    assert status == 200
    capabilities = json.loads(text)["result"]["capabilities"]
    assert set(capabilities) == {"tools", "prompts", "resources", "completions"}
    # Baseline only: "greet" is still allowed, no resource is.
    status, _, text = await live.modern(live.token("mcp:access"), "server/discover")
    assert set(json.loads(text)["result"]["capabilities"]) == {"tools", "prompts", "completions"}
    initialize = legacy_initialize_body("2025-06-18", rid=1)
    status, _, text = await live.post(live.token("mcp:access docs:read"), initialize)
    assert set(json.loads(text)["result"]["capabilities"]) == {
        "tools",
        "prompts",
        "resources",
        "completions",
    }


async def test_2026_lists_and_reads_carry_the_caching_members(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, _ = stack
    token = live.token("mcp:access docs:read")
    for method in ("prompts/list", "resources/list", "resources/templates/list"):
        status, headers, text = await live.modern(token, method)
        assert status == 200, text
        result = json.loads(text)["result"]
        assert result["resultType"] == "complete"
        assert result["cacheScope"] == "private" and isinstance(result["ttlMs"], int)
        assert headers["Cache-Control"] == "no-store"
    status, _, text = await live.modern(
        token, "resources/read", {"uri": "docs://guide/intro"}, name="docs://guide/intro"
    )
    result = json.loads(text)["result"]
    assert (result["resultType"], result["cacheScope"], result["ttlMs"]) == (
        "complete",
        "private",
        0,
    )
    status, _, text = await live.post(
        token,
        {"jsonrpc": "2.0", "id": 2, "method": "resources/list"},
        {"MCP-Protocol-Version": "2025-06-18"},
    )
    legacy = json.loads(text)["result"]
    assert "ttlMs" not in legacy and "cacheScope" not in legacy and "resultType" not in legacy


async def test_lists_page_with_opaque_cursors(make_stack: MakeStack) -> None:
    async with make_stack.of(sdk_stack, policy=POLICY, gateway={"protocol": {"page_size": 1}}) as (
        live,
        _sdk,
    ):
        token = live.token("mcp:access docs:read plans:read")
        seen: list[str] = []
        cursor = None
        for _ in range(5):
            params = {"cursor": cursor} if cursor else {}
            status, _, text = await live.modern(token, "prompts/list", params)
            result = json.loads(text)["result"]
            seen += [p["name"] for p in result["prompts"]]
            cursor = result.get("nextCursor")
            if cursor is None:
                break
        assert seen == ["greet", "secret_plan"]
        status, _, text = await live.modern(token, "prompts/list", {"cursor": "bogus!"})
        assert status == 400 and json.loads(text)["error"]["code"] == -32602


async def test_audit_events_name_the_prompt_and_the_uri_and_the_token_stays_home(
    stack: tuple[LiveStack, SdkUpstream], capfd: pytest.CaptureFixture[str]
) -> None:
    live, _ = stack
    token = live.token("mcp:access docs:read")
    await live.modern(
        token, "prompts/get", {"name": "greet", "arguments": {"name": "x"}}, name="greet"
    )
    await live.modern(
        token, "resources/read", {"uri": "docs://guide/intro"}, name="docs://guide/intro"
    )
    await live.modern(
        token, "resources/read", {"uri": "docs://private/keys"}, name="docs://private/keys"
    )
    captured = capfd.readouterr()
    events = [json.loads(line) for line in captured.out.splitlines() if '"log":"audit"' in line]
    got = [(e["event"], e.get("prompt") or e.get("uri"), e["decision"], e["rule"]) for e in events]
    assert got == [
        ("prompt_get", "greet", "allow", "greet"),
        ("resource_read", "docs://guide/intro", "allow", "docs://guide/**"),
        ("resource_read", "docs://private/keys", "deny", "docs://private/**"),
    ]
    assert token not in captured.out and token not in captured.err
    _status, _, metrics = await _metrics(live)
    assert (
        'mcp_gateway_surface_requests_total{method="resources/read",outcome="ok",'
        'rule="docs://guide/**"} 1.0' in metrics
    )
    assert token not in metrics


async def _metrics(live: LiveStack) -> tuple[int, dict[str, str], str]:
    async with live.session.get(live.server.ops_url + "/metrics") as response:
        return response.status, dict(response.headers), await response.text()


@pytest.mark.row("invalid_prompt_arguments")
@pytest.mark.parametrize(
    ("arguments", "status"),
    [
        ({"name": "x" * 8192}, 200),  # at the limit
        ({"name": "x" * 8193}, 400),  # just past it
        ({}, 400),  # the required argument missing
        ({"name": "a", "mood": "b"}, 400),  # an argument the prompt does not declare
        ({"name": "a", "style": "fancy"}, 200),
    ],
    ids=["at-limit", "past-limit", "missing-required", "undeclared", "optional"],
)
async def test_prompt_arguments_are_checked_before_anything_is_sent(
    stack: tuple[LiveStack, SdkUpstream], arguments: dict[str, str], status: int
) -> None:
    live, sdk = stack
    token = live.token("mcp:access")
    answer = await live.modern(
        token, "prompts/get", {"name": "greet", "arguments": arguments}, name="greet"
    )
    assert answer[0] == status, answer[2]
    if status == 400:
        assert json.loads(answer[2])["error"] == {
            "code": -32602,
            "message": "Invalid prompt arguments",
        }
        assert sdk.count("prompts/get") == 0
    legacy = await live.post(
        token,
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "prompts/get",
            "params": {"name": "greet", "arguments": arguments},
        },
        {"MCP-Protocol-Version": "2025-06-18"},
    )
    assert legacy[0] == 200
    assert ("error" in json.loads(legacy[2])) is (status == 400)


@pytest.mark.row("invalid_params")
async def test_a_prompt_argument_that_is_not_a_string_is_invalid_params(
    stack: tuple[LiveStack, SdkUpstream],
) -> None:
    live, _ = stack
    answer = await live.modern(
        live.token("mcp:access"),
        "prompts/get",
        {"name": "greet", "arguments": {"name": 1}},
        name="greet",
    )
    assert answer[0] == 400
    assert json.loads(answer[2])["error"] == {"code": -32602, "message": "Invalid params"}


async def test_listing_step_up_also_lists_what_more_scopes_would_unlock(
    make_stack: MakeStack,
) -> None:
    async with make_stack.of(
        sdk_stack,
        policy=POLICY.replace("version: 1\n", "version: 1\nlisting: step_up\n"),
    ) as (live, _sdk):
        token = live.token("mcp:access")
        _, _, text = await live.modern(token, "prompts/list")
        assert [p["name"] for p in json.loads(text)["result"]["prompts"]] == [
            "greet",
            "secret_plan",
        ]
        _, _, text = await live.modern(token, "resources/list")
        assert sorted(r["uri"] for r in json.loads(text)["result"]["resources"]) == [
            "docs://guide/intro",
            "docs://guide/logo.png",
            "docs://private/keys",
        ]
        _, _, text = await live.modern(token, "server/discover")
        assert "resources" in json.loads(text)["result"]["capabilities"]
        status, _, _ = await live.modern(
            token, "resources/read", {"uri": "docs://private/keys"}, name="docs://private/keys"
        )
        assert status == 403
