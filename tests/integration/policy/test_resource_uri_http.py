"""Resource URIs are decided on one spelling and forwarded in the same one (issue 43, item 2).

Through real HTTP: recording upstreams (:mod:`tests.support.upstreams`) show the URI each
``resources/read`` brought them. With two backends, ``..`` in the wrapped URI of
``mcp-gw://<backend>/<URI>`` cannot strip that URI's authority; with the docs' own
``file:///docs/private/**`` example, ``%2F``, a backslash or ``//`` cannot slip past the narrower
rule to a backend that decodes or collapses them. What has no single normal form is refused with
-32602 in both eras, without asking any backend; everything else reaches the backend in exactly
the normal form the policy decided on. The subscription paths take the same form: a legacy
``resources/subscribe`` and a ``subscriptions/listen`` refuse an ambiguous URI and ask the
backend for the normal form.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.server.subscriptions import ResourceUpdated

from gateway.policy.policy_loader import load_policy
from gateway.policy.uri import normalize_uri
from tests.support.live_stack import (
    MODERN,
    LiveStack,
    MakeStack,
    ServerFactory,
    modern_meta,
)
from tests.support.mcp_client import legacy_initialize_body
from tests.support.policy import policy_text, who, write_text
from tests.support.sdk_stack import next_event, sdk_client, sdk_stack
from tests.support.upstreams import ModernUpstream

FEDERATION_POLICY = policy_text(
    tools={"*": ""},
    resources={
        "mcp-gw://alpha/**": "",
        "mcp-gw://alpha/rt://secret/**": "secret:read",
        "mcp-gw://alpha/file:///docs/private/**": "docs:admin",
        "mcp-gw://beta/**": "",
    },
)
DOCS_POLICY = """
version: 1
baseline_scopes: [mcp:access]
tools:
  "*": {scopes: []}
resources:
  "file:///docs/**":          {scopes: [docs:read]}
  "file:///docs/private/**":  {scopes: [docs:admin]}
"""
AMBIGUOUS = {"code": -32602, "message": "Ambiguous resource URI"}
LEGACY = {"MCP-Protocol-Version": "2025-11-25"}


def recording(uri: str) -> ModernUpstream:
    """A 2026 upstream that offers resources and answers every read (and records it)."""
    contents = {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "x"}]}
    return ModernUpstream(
        accepted={"uri-secret"},
        answers={"resources/list": {"resources": []}, "resources/read": contents},
    )


def received(upstream: ModernUpstream) -> list[str]:
    """The URI of every ``resources/read`` the upstream was sent, in order."""
    return [call.json["params"]["uri"] for call in upstream.calls("resources/read")]


async def read(live: LiveStack, token: str, uri: str, era: str) -> tuple[int, dict[str, str], Any]:
    if era == "modern":
        status, headers, text = await live.modern(token, "resources/read", {"uri": uri}, name=uri)
    else:
        body = {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": uri}}
        status, headers, text = await live.post(token, body, LEGACY)
    return status, headers, json.loads(text)


@pytest.fixture
async def federation(
    aiohttp_server: ServerFactory, make_stack: MakeStack, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[LiveStack, ModernUpstream, ModernUpstream]]:
    alpha, beta = recording("rt://alpha/x"), recording("rt://beta/x")
    monkeypatch.setenv("URI_SECRET", "uri-secret")
    settings: dict[str, dict[str, Any]] = {}
    for name, upstream in (("alpha", alpha), ("beta", beta)):
        settings[name] = {
            "url": str((await aiohttp_server(upstream.app())).make_url("/mcp")),
            "allow_insecure_http": True,
            "credential": {"type": "bearer", "token": {"env": "URI_SECRET"}},
        }
    async with make_stack(
        policy=FEDERATION_POLICY,
        backends=settings,
        gateway={"audit": {"sink": "stdout"}},
    ) as live:
        yield live, alpha, beta


@pytest.fixture
async def docs(make_stack: MakeStack) -> AsyncIterator[tuple[LiveStack, ModernUpstream]]:
    upstream = recording("file:///docs/x")
    upstream.accepted = {"service-secret"}
    async with make_stack(upstream=upstream, policy=DOCS_POLICY) as live:
        yield live, upstream


@pytest.mark.row("ambiguous_resource_uri")
@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_dot_segments_never_cross_the_wrapped_uris_authority(
    federation: tuple[LiveStack, ModernUpstream, ModernUpstream], era: str
) -> None:
    live, alpha, beta = federation
    token = live.token("mcp:access")
    # Decided as rt://public/x by the old code, read as rt://secret/public/x by the backend.
    for uri in (
        "mcp-gw://alpha/rt://secret/../public/x",
        "mcp-gw://alpha/rt://secret/%2e%2e/x",
        "mcp-gw://alpha/rt://a/../../secret/x",
    ):
        status, headers, body = await read(live, token, uri, era)
        assert status == (400 if era == "modern" else 200), body
        assert body["error"] == AMBIGUOUS and body["id"] == (1 if era == "modern" else 3)
        assert headers["Cache-Control"] == "no-store"
    assert received(alpha) == received(beta) == []  # nothing ambiguous reached a backend


async def test_the_backend_is_sent_the_normal_form_the_policy_decided_on(
    federation: tuple[LiveStack, ModernUpstream, ModernUpstream],
    capfd: pytest.CaptureFixture[str],
) -> None:
    live, alpha, beta = federation
    token = live.token("mcp:access")
    spellings = {
        "MCP-GW://Alpha/RT://Public/%7e/a/../b?q=%41": "rt://public/~/b?q=A",
        "mcp-gw://alpha/rt://public/./c%2a": "rt://public/c%2A",
        "mcp-gw://beta/FILE:///docs/%2e/readme": "file:///docs/readme",
    }
    for sent in spellings:
        for era in ("modern", "legacy"):
            status, _, body = await read(live, token, sent, era)
            assert status == 200 and "result" in body, body
    assert received(alpha) == [normal for normal in list(spellings.values())[:2] for _ in "ml"]
    assert received(beta) == ["file:///docs/readme"] * 2
    # The audit trail names the URI that was decided on and sent, not the client's spelling.
    lines = capfd.readouterr().out.splitlines()
    audited = {json.loads(line).get("uri") for line in lines if '"log":"audit"' in line}
    assert audited == {
        "mcp-gw://alpha/rt://public/~/b?q=A",
        "mcp-gw://alpha/rt://public/c%2A",
        "mcp-gw://beta/file:///docs/readme",
    }
    # A dot segment inside the wrapped URI stays inside it: still the secret rule (step-up).
    status, _, body = await read(live, token, "mcp-gw://alpha/rt://secret/a/../keys", "modern")
    assert status == 403 and received(alpha)[-1] == "rt://public/c%2A"


@pytest.mark.row("ambiguous_resource_uri")
@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_the_docs_private_rule_cannot_be_dodged(
    docs: tuple[LiveStack, ModernUpstream], era: str
) -> None:
    live, upstream = docs
    token = live.token("mcp:access docs:read")  # file:///docs/** only, not private/**
    dodges = (
        "file:///docs/private%2Fkeys",  # a server decoding %2F reads /docs/private/keys
        "file:///docs/private%2fkeys",
        "file:///docs//private/keys",  # one collapsing // does too
        "file:///docs/private\\keys",  # one reading \ as / does too
        "file:///docs/private%5Ckeys",
        "file:///../docs/private/keys",  # one that does not clamp .. at the root reads elsewhere
    )
    for uri in dodges:
        status, headers, body = await read(live, token, uri, era)
        assert status == (400 if era == "modern" else 200), uri
        assert body["error"] == AMBIGUOUS, uri
        assert headers["Cache-Control"] == "no-store"
    assert received(upstream) == []
    # The same resource in a spelling with one meaning meets the narrower rule: a step-up.
    status, _, body = await read(live, token, "file:///docs/public/%2e%2e/private/keys", era)
    assert (status, body["error"]["code"]) == (403, -31403)
    status, _, body = await read(live, token, "file:///docs/a/./b/", era)
    assert status == 200 and received(upstream) == ["file:///docs/a/b/"]


async def test_a_legacy_control_character_is_refused_over_http(
    docs: tuple[LiveStack, ModernUpstream],
) -> None:
    live, upstream = docs
    token = live.token("mcp:access docs:read")
    for uri in ("file:///docs/a\x00b", "file:///docs/a%00b", "file:///docs/a%0A"):
        status, _, body = await read(live, token, uri, "legacy")
        assert status == 200 and body["error"] == AMBIGUOUS, uri
    assert received(upstream) == []


PIECES = st.sampled_from(
    [
        "docs",
        "private",
        "public",
        "keys",
        "a",
        ".",
        "..",
        "%2e",
        "%2E%2e",
        "%2F",
        "%2f",
        "\\",
        "%5c",
        "/",
        "//",
        "%7E",
        "A",
        "?",
        "%41",
        "x%20y",
    ]
)
PREFIXES = st.sampled_from(
    [
        "mcp-gw://alpha/file:///",
        "mcp-gw://alpha/rt://",
        "MCP-GW://Alpha/RT://Secret/",
        "mcp-gw://beta/file:///docs/",
        "mcp-gw://alpha/file:///docs/",
    ]
)


async def test_whatever_a_client_sends_a_backend_gets_only_a_normal_form_the_policy_allows(
    federation: tuple[LiveStack, ModernUpstream, ModernUpstream],
) -> None:
    """Property: every ``resources/read`` either is refused without a backend being asked, or
    reaches exactly one backend with a URI that is its own normal form and that the policy,
    deciding on exactly those bytes, allows this caller."""
    live, alpha, beta = federation
    policy = load_policy([write_text(live.config_path.parent / "p.yaml", FEDERATION_POLICY)])
    caller = who("mcp:access")
    token = live.token("mcp:access")
    loop = asyncio.get_running_loop()

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(PREFIXES, st.lists(PIECES, max_size=6), st.sampled_from(["modern", "legacy"]))
    def check(prefix: str, pieces: list[str], era: str) -> None:
        sent = prefix + "".join(pieces)
        before = received(alpha), received(beta)
        _, _, body = asyncio.run_coroutine_threadsafe(read(live, token, sent, era), loop).result(
            timeout=30
        )
        after = received(alpha), received(beta)
        new = [
            (name, uris[len(old) :])
            for name, old, uris in zip(("alpha", "beta"), before, after, strict=True)
        ]
        forwarded = [(name, uri) for name, uris in new for uri in uris]
        if "result" not in body:
            assert forwarded == [], (sent, body)
            return
        assert len(forwarded) == 1, sent
        backend, uri = forwarded[0]
        decided = f"mcp-gw://{backend}/{uri}"
        assert normalize_uri(uri) == uri and normalize_uri(decided) == decided, sent
        assert normalize_uri(sent) == decided, sent
        assert policy.decide_resource(caller, decided).allowed, sent

    await asyncio.to_thread(check)


SUBSCRIBE_POLICY = policy_text(
    tools={"echo": ""}, resources={"docs://guide/**": "", "docs://private/**": "docs:admin"}
)
LISTEN = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"}


@pytest.mark.row("ambiguous_resource_uri")
async def test_subscriptions_refuse_an_ambiguous_uri_and_ask_for_the_normal_form(
    make_stack: MakeStack,
) -> None:
    async with make_stack.of(sdk_stack, policy=SUBSCRIBE_POLICY) as (
        live,
        sdk,
    ):
        token = live.token("mcp:access")
        listens = sdk.count("subscriptions/listen")  # the gateway's own, for list changes
        listen = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "subscriptions/listen",
            "params": {
                "_meta": modern_meta(),
                "notifications": {
                    "resourceSubscriptions": ["docs://guide/intro", "docs://guide%2F..%2Fprivate"]
                },
            },
        }
        status, headers, text = await live.post(token, listen, LISTEN)
        assert status == 400 and headers["Cache-Control"] == "no-store", text
        assert json.loads(text)["error"] == AMBIGUOUS
        # Legacy: resources/subscribe in a session, then unsubscribe: -32602 with HTTP 200.
        init = legacy_initialize_body(LEGACY["MCP-Protocol-Version"])
        status, headers, _ = await live.post(token, init)
        session = {"Mcp-Session-Id": headers["Mcp-Session-Id"], **LEGACY}
        for method in ("resources/subscribe", "resources/unsubscribe"):
            body = {
                "jsonrpc": "2.0",
                "id": 4,
                "method": method,
                "params": {"uri": "docs://guide//private/keys"},
            }
            status, _, text = await live.post(token, body, session)
            assert status == 200 and json.loads(text)["error"] == AMBIGUOUS, method
        assert sdk.count("subscriptions/listen") == listens  # nothing was asked upstream
        # A spelling with one meaning is asked for, acknowledged and heard in its normal form.
        http, client = sdk_client(live, token)
        async with (
            http,
            client,
            client.listen(resource_subscriptions=["DOCS://Guide/./%69ntro"]) as sub,
        ):
            assert sub.honored.resource_subscriptions == ["docs://guide/intro"]
            await sdk.bus.publish(ResourceUpdated(uri="docs://guide/intro"))
            heard = await next_event(sub)
            assert isinstance(heard, ResourceUpdated) and heard.uri == "docs://guide/intro"


async def test_a_pattern_of_many_wildcards_over_a_long_uri_answers_at_once(
    make_stack: MakeStack,
) -> None:
    """Resource patterns were backtracking regexes: ``file:///**a**a**a**b`` against a
    2,000-character URI held the event loop for minutes (0.8 s at 400 characters), and the URI
    is the caller's. Both answers come back now, through the pattern's linear automaton."""
    policy = DOCS_POLICY.replace(
        '"file:///docs/private/**"',
        '"file:///**a**a**a**b": {scopes: []}\n  "file:///docs/private/**"',
    )
    upstream = recording("file:///x")
    upstream.accepted = {"service-secret"}
    async with make_stack(upstream=upstream, policy=policy) as live:
        token = live.token("mcp:access")
        status, _, body = await read(live, token, "file:///" + "a" * 2000, "modern")
        assert status == 400 and body["error"]["code"] == -32602  # matches no rule: unknown
        status, _, body = await read(live, token, "file:///" + "a" * 1999 + "b", "modern")
        assert status == 200, body
        assert received(upstream) == ["file:///" + "a" * 1999 + "b"]
