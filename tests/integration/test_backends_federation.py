"""Several MCP backends behind one endpoint (issue 14), through the real HTTP surface.

Real components only: the development issuer, the production wiring, and two recording
upstreams of ``tests/support/upstreams.py`` behind one gateway (:mod:`tests.support.federation`):
``docs`` (2026-07-28, JSON, static bearer) and ``tickets`` (2025-06-18, session + SSE, client
credentials from its own token endpoint).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gateway.backend.federation import FederatedBackend
from gateway.backend.upstream_backend import UpstreamBackend
from gateway.commands.cli import main
from tests.support.federation import DOCS_SECRET, TICKETS_CLIENT_SECRET, federated_stack, scopes
from tests.support.federation import POLICY as FEDERATED_POLICY
from tests.support.live_stack import LEGACY, MODERN, MakeStack, ServerFactory
from tests.support.schemas import validate_response
from tests.support.upstreams import LegacyUpstream, ModernUpstream, Recorded, echo_tool

MERGED = ["docs__echo", "docs__search", "tickets__create", "tickets__echo"]


def _text(envelope: dict[str, Any]) -> str:
    return str(envelope["result"]["content"][0]["text"])


def _member(fed: Any, name: str) -> UpstreamBackend:
    federation = fed.stack.server.services.backend
    assert isinstance(federation, FederatedBackend)
    member = federation.member(name)
    assert member is not None
    return member


def _sample(metrics: str, name: str, **labels: str) -> float | None:
    for line in metrics.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


async def _eventually(check: Any, timeout_s: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await check():
        assert loop.time() < deadline, "condition never became true"
        await asyncio.sleep(0.05)


def _bearers(requests: list[Recorded]) -> set[str | None]:
    return {r.headers.get("Authorization") for r in requests}


class TestOneEndpointTwoBackends:
    async def test_both_eras_list_the_merged_catalog_and_call_each_backend_with_its_credential(
        self,
        tmp_path: Path,
        make_stack: MakeStack,
        log_events: list[MutableMapping[str, Any]],
    ) -> None:
        audit = tmp_path / "audit.jsonl"
        gateway = {"audit": {"sink": "file", "path": str(audit)}}
        async with make_stack.of(federated_stack, gateway=gateway) as fed:
            token = fed.token()
            # A modern client: one merged, sorted list, validated against the schema.
            status, _, envelope = await fed.modern(token, "tools/list")
            assert status == 200
            validate_response(MODERN, envelope, "tools/list")
            assert [t["name"] for t in envelope["result"]["tools"]] == MERGED
            # A legacy client sees the same list.
            await fed.legacy_initialize(token)
            status, envelope = await fed.legacy(token, "tools/list")
            assert status == 200
            validate_response(LEGACY, envelope, "tools/list")
            assert [t["name"] for t in envelope["result"]["tools"]] == MERGED

            # Each client calls a tool on each backend.
            calls = [
                ("modern", "docs__search", "m-docs"),
                ("modern", "tickets__create", "m-tickets"),
                ("legacy", "docs__echo", "l-docs"),
                ("legacy", "tickets__echo", "l-tickets"),
            ]
            for era, tool, text in calls:
                params = {"name": tool, "arguments": {"text": text}}
                if era == "modern":
                    status, _, envelope = await fed.modern_call(token, tool, {"text": text})
                    validate_response(MODERN, envelope, "tools/call")
                else:
                    status, envelope = await fed.legacy(token, "tools/call", params)
                    validate_response(LEGACY, envelope, "tools/call")
                assert status == 200, envelope
                assert envelope["result"]["isError"] is False
                assert _text(envelope) == json.dumps({"text": text})
            metrics = await fed.metrics()

        # Each upstream saw only calls to its own tools, under their own names...
        docs_calls = [r.json["params"] for r in fed.docs.calls("tools/call")]
        tickets_calls = [r.json["params"] for r in fed.tickets.calls("tools/call")]
        assert [(p["name"], p["arguments"]) for p in docs_calls] == [
            ("search", {"text": "m-docs"}),
            ("echo", {"text": "l-docs"}),
        ]
        assert [(p["name"], p["arguments"]) for p in tickets_calls] == [
            ("create", {"text": "m-tickets"}),
            ("echo", {"text": "l-tickets"}),
        ]
        # ... the modern one also in the mirrored Mcp-Name header ...
        assert [r.headers["Mcp-Name"] for r in fed.docs.calls("tools/call")] == ["search", "echo"]
        # ... and only its own service credential, on every request it received.
        tickets_tokens = {f"Bearer {value}" for value in fed.tokens.issued}
        assert fed.tokens.issued  # tickets' own client credentials, at its own token endpoint
        assert all(header and header.startswith("Basic ") for header in fed.tokens.auth_headers)
        assert _bearers(fed.docs.requests) == {f"Bearer {DOCS_SECRET}"}
        assert _bearers(fed.tickets.requests) <= tickets_tokens
        for request in fed.tickets.requests:
            wire = repr(request.headers).encode() + request.body
            assert DOCS_SECRET.encode() not in wire
            assert b"docs__" not in wire and b"tickets__" not in wire
            assert token.encode() not in wire
        for request in fed.docs.requests:
            wire = repr(request.headers).encode() + request.body
            assert TICKETS_CLIENT_SECRET.encode() not in wire
            assert not any(value.encode() in wire for value in fed.tokens.issued)
            assert b"docs__" not in wire and b"tickets__" not in wire
            assert token.encode() not in wire

        # The audit trail and the access line name the backend; the client's token is nowhere.
        events = [json.loads(line) for line in audit.read_text().splitlines()]
        assert [(e["tool"], e["backend"], e["outcome"]) for e in events] == [
            ("docs__search", "docs", "ok"),
            ("tickets__create", "tickets", "ok"),
            ("docs__echo", "docs", "ok"),
            ("tickets__echo", "tickets", "ok"),
        ]
        access = [line for line in log_events if line["event"] == "mcp.request"]
        assert [line["backend"] for line in access if line["method"] == "tools/call"] == [
            "docs",
            "tickets",
            "docs",
            "tickets",
        ]
        assert {line["backend"] for line in access if line["method"] == "tools/list"} == {None}
        assert token not in audit.read_text() + repr(log_events) + metrics
        # Backend metrics are labelled by backend name.
        assert (
            _sample(
                metrics,
                "mcp_gateway_backend_requests_total",
                backend="docs",
                tool="docs__search",
                outcome="ok",
            )
            == 1.0
        )
        assert (
            _sample(
                metrics,
                "mcp_gateway_backend_requests_total",
                backend="tickets",
                tool="tickets__create",
                outcome="ok",
            )
            == 1.0
        )
        assert _sample(metrics, "mcp_gateway_catalog_tools", backend="docs") == 2.0
        assert _sample(metrics, "mcp_gateway_backend_ready", backend="tickets") == 1.0
        assert _sample(metrics, "mcp_gateway_catalog_collisions", backend="tickets") == 0.0

    async def test_readyz_reports_each_backend_and_its_era(self, make_stack: MakeStack) -> None:
        async with make_stack.of(federated_stack) as fed:
            status, body = await fed.readyz()
            assert status == 200
            assert body["checks"]["backend_catalog"] is True
            backends = body["backends"]
            assert list(backends) == ["docs", "tickets"]
            assert {
                name: (b["ready"], b["era"], b["tools"], b["hidden"])
                for name, b in backends.items()
            } == {
                "docs": (True, "modern", 2, 0),
                "tickets": (True, "legacy", 2, 0),
            }
            # Each backend has its own connection pool (outbound destination).
            assert _member(fed, "docs").link.destination != _member(fed, "tickets").link.destination
            # The owner lookup later layers use: exposed name -> backend.
            federation = fed.stack.server.services.backend
            assert isinstance(federation, FederatedBackend)
            assert federation.owner("tickets__echo") is _member(fed, "tickets")
            assert federation.owner("echo") is None
            assert federation.readiness() == {"docs": True, "tickets": True}


class TestPagingAndFreshness:
    async def test_cursors_page_across_backends_in_both_eras(self, make_stack: MakeStack) -> None:
        docs = ModernUpstream(accepted={DOCS_SECRET}, tools=[echo_tool(f"d{i}") for i in range(5)])
        tickets = LegacyUpstream(accepted=set(), tools=[echo_tool(f"t{i}") for i in range(4)])
        expected = [f"docs__d{i}" for i in range(5)] + [f"tickets__t{i}" for i in range(4)]
        # A page (3) smaller than one backend's catalog (5): pages straddle the two backends.
        gateway = {"protocol": {"page_size": 3}}
        async with make_stack.of(
            federated_stack, docs=docs, tickets=tickets, gateway=gateway
        ) as fed:
            token = fed.token()
            pages: list[list[str]] = []
            cursor = None
            while True:
                params = {"cursor": cursor} if cursor else {}
                _, _, envelope = await fed.modern(token, "tools/list", params)
                result = envelope["result"]
                pages.append([tool["name"] for tool in result["tools"]])
                cursor = result.get("nextCursor")
                if cursor is None:
                    break
                assert "docs" not in cursor and "tickets" not in cursor  # opaque
            assert pages == [expected[0:3], expected[3:6], expected[6:9]]
            assert await fed.listed(token, era="legacy") == expected
            # A cursor this gateway did not issue is -32602.
            status, _, envelope = await fed.modern(token, "tools/list", {"cursor": "docs__d1"})
            assert (status, envelope["error"]["code"]) == (400, -32602)
        # The upstream's own paging (2 per page) was followed for the modern backend.
        assert len(docs.calls("tools/list")) >= 3

    async def test_the_listing_ttl_is_the_shortest_part_within_the_configured_bound(
        self,
        tmp_path: Path,
        aiohttp_server: ServerFactory,
        make_stack: MakeStack,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        # docs advertises ttlMs 15000 (interval 15 s), tickets polls every 40 s: 15000 wins,
        # below protocol.tools_list_ttl_ms (60000 by default).
        docs = ModernUpstream(accepted={DOCS_SECRET}, tools=[echo_tool("search")])
        docs.ttl_ms = 15_000
        backends = {"tickets": {"catalog_refresh_s": 40}}
        async with make_stack.of(federated_stack, docs=docs, backends=backends) as fed:
            _, _, envelope = await fed.modern(fed.token(), "tools/list")
            assert envelope["result"]["ttlMs"] == 15_000
            assert _member(fed, "tickets").refresh_interval == 40.0
        # The configured bound caps it: tools_list_ttl_ms 5000 < every part.
        bounded = tmp_path / "bounded"
        bounded.mkdir()
        async with federated_stack(
            bounded,
            aiohttp_server,
            monkeypatch,
            gateway={"protocol": {"tools_list_ttl_ms": 5000}},
        ) as fed:
            _, _, envelope = await fed.modern(fed.token(), "tools/list")
            assert envelope["result"]["ttlMs"] == 5000

    async def test_list_changed_from_one_backend_refreshes_only_its_part(
        self, make_stack: MakeStack
    ) -> None:
        docs = ModernUpstream(accepted={DOCS_SECRET}, tools=[echo_tool("search")])
        docs.list_changed = True
        slow = {"catalog_refresh_s": 300}  # a change seen in time came from the notification
        async with make_stack.of(
            federated_stack,
            docs=docs,
            backends={"docs": slow, "tickets": slow},
        ) as fed:
            assert await fed.listed() == ["docs__search", "tickets__create", "tickets__echo"]
            await _eventually(lambda: _true(docs.streams_opened > 0))
            tickets_lists = len(fed.tickets.calls("tools/list"))
            docs.tools.append(echo_tool("fresh"))
            docs.announce()

            async def fresh_listed() -> bool:
                return "docs__fresh" in await fed.listed()

            await _eventually(fresh_listed)
            assert len(fed.tickets.calls("tools/list")) == tickets_lists


async def _true(value: bool) -> bool:
    return value


class _ListsFirst(ModernUpstream):
    """Sets ``listed`` once it has answered a ``tools/list``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.listed = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        response = await super().handle(request)
        if self.calls("tools/list"):
            self.listed.set()
        return response


class _ListsSecond(LegacyUpstream):
    """Answers nothing before ``after`` is set (and the gateway has had a moment to apply it)."""

    def __init__(self, *, after: asyncio.Event, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._after = after

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if not self._after.is_set():
            await asyncio.wait_for(self._after.wait(), 10)
            await asyncio.sleep(0.1)
        return await super().handle(request)


class TestCollisions:
    async def test_a_runtime_collision_hides_both_tools_with_a_warning_and_a_metric(
        self,
        make_stack: MakeStack,
        log_events: list[MutableMapping[str, Any]],
    ) -> None:
        # tickets has the empty prefix (allowed once): its docs__search collides with docs'
        # search, its docs__ghost lies inside docs' namespace; plain is its own.
        docs = _ListsFirst(accepted={DOCS_SECRET}, tools=[echo_tool("search"), echo_tool("x")])
        # tickets answers once docs has listed its tools: were tickets' catalog first, its
        # docs__search would first be a prefix collision (docs' namespace, docs' tools not yet
        # known) and only then a same_name one, and the warnings would depend on start order.
        tickets = _ListsSecond(
            after=docs.listed,
            accepted=set(),
            tools=[echo_tool("docs__search"), echo_tool("docs__ghost"), echo_tool("plain")],
        )
        policy = "version: 1\nbaseline_scopes: [mcp:access]\ntools:\n  '*': {scopes: []}\n"
        async with make_stack.of(
            federated_stack,
            docs=docs,
            tickets=tickets,
            backends={"tickets": {"prefix": ""}},
            policy=policy,
        ) as fed:
            token = fed.token()
            assert await fed.listed(token) == ["docs__x", "plain"]
            assert await fed.listed(token, era="legacy") == ["docs__x", "plain"]
            for hidden in ("docs__search", "docs__ghost"):
                status, _, envelope = await fed.modern_call(token, hidden, {"text": "?"})
                assert (status, envelope["error"]["code"]) == (400, -32602)
            status, _, envelope = await fed.modern_call(token, "plain", {"text": "ok"})
            assert status == 200 and _text(envelope) == '{"text": "ok"}'
            metrics = await fed.metrics()
            _, ready = await fed.readyz()

            # A collision that appears at runtime (a refresh) hides the new pair too.
            tickets.tools.append(echo_tool("docs__x"))
            assert await _member(fed, "tickets").refresh()
            assert await fed.listed(token) == ["plain"]
            later = await fed.metrics()
        assert docs.calls("tools/call") == []
        assert [r.json["params"]["name"] for r in tickets.calls("tools/call")] == ["plain"]
        warnings = [line for line in log_events if line["event"] == "backend_tool_collision"]
        assert [(w["tool"], w["backends"], w["reason"], w["log_level"]) for w in warnings] == [
            ("docs__ghost", ["tickets", "docs"], "prefix", "warning"),
            ("docs__search", ["docs", "tickets"], "same_name", "warning"),
            ("docs__x", ["docs", "tickets"], "same_name", "warning"),
        ]
        assert _sample(metrics, "mcp_gateway_catalog_collisions", backend="docs") == 1.0
        assert _sample(metrics, "mcp_gateway_catalog_collisions", backend="tickets") == 2.0
        assert _sample(later, "mcp_gateway_catalog_collisions", backend="docs") == 2.0
        assert _sample(later, "mcp_gateway_catalog_collisions", backend="tickets") == 3.0
        assert ready["backends"]["tickets"]["hidden"] == 2
        assert ready["backends"]["docs"]["hidden"] == 1


class TestIndependence:
    @pytest.mark.parametrize(("readiness", "ready_status"), [("all", 503), ("any", 200)])
    async def test_one_backend_down_at_startup_the_other_serves_and_readiness_follows_the_setting(
        self,
        make_stack: MakeStack,
        readiness: str,
        ready_status: int,
    ) -> None:
        tickets = LegacyUpstream(accepted=set(), tools=[echo_tool("create")])
        tickets.fault = "list_fails"  # up, but its catalog cannot be fetched
        async with make_stack.of(
            federated_stack,
            tickets=tickets,
            gateway={"backend_readiness": readiness},
            wait_ready=False,
        ) as fed:

            async def docs_ready() -> bool:
                _, body = await fed.readyz()
                return bool(body.get("backends", {}).get("docs", {}).get("ready"))

            await _eventually(docs_ready)
            status, body = await fed.readyz()
            assert status == ready_status, body
            assert body["checks"]["backend_catalog"] is (readiness == "any")
            assert body["backends"]["tickets"]["ready"] is False
            # Whatever readiness says, the endpoint serves the backend that is there.
            token = fed.token()
            assert await fed.listed(token) == ["docs__echo", "docs__search"]
            status, _, envelope = await fed.modern_call(token, "docs__search", {"text": "a"})
            assert status == 200 and envelope["result"]["isError"] is False
            status, _, envelope = await fed.modern_call(token, "tickets__create", {"text": "a"})
            assert (status, envelope["error"]["code"]) == (400, -32602)  # not in any catalog

            # When the backend recovers (retried with back-off), its tools appear and the
            # gateway becomes ready under either setting.
            tickets.fault = None

            async def all_ready() -> bool:
                status, _ = await fed.readyz()
                return status == 200 and "tickets__create" in await fed.listed(token)

            await _eventually(all_ready)
            status, _, envelope = await fed.modern_call(token, "tickets__create", {"text": "b"})
            assert status == 200 and envelope["result"]["isError"] is False

    async def test_an_unreachable_backend_at_startup_fails_only_its_own_readiness(
        self, make_stack: MakeStack
    ) -> None:
        async with make_stack.of(
            federated_stack,
            tickets_url="http://127.0.0.1:9/mcp",
            gateway={"backend_readiness": "any"},
            backends={"tickets": {"timeout_s": 2}},
            wait_ready=False,
        ) as fed:

            async def ready() -> bool:
                return (await fed.readyz())[0] == 200

            await _eventually(ready)
            _, body = await fed.readyz()
            tickets = body["backends"]["tickets"]
            assert tickets == {
                "ready": False,
                "era": None,
                "tools": 0,
                "hidden": 0,
                "catalog_age_s": tickets["catalog_age_s"],
            }
            assert tickets["catalog_age_s"] >= 0.0  # since start: never fetched
            assert await fed.listed() == ["docs__echo", "docs__search"]

    @pytest.mark.row("tool_error_result")
    @pytest.mark.parametrize(
        ("fault", "text"),
        [
            ("slow", "Upstream tool timed out"),
            ("500", "Upstream tool failed"),
            ("garbled_sse", "Upstream tool failed"),
            ("oversized", "Upstream reply too large"),
        ],
        ids=["slow", "HTTP 500", "garbage", "oversized"],
    )
    async def test_one_backend_failing_mid_run_affects_only_its_own_tools(
        self,
        make_stack: MakeStack,
        fault: str,
        text: str,
    ) -> None:
        # One pooled connection for tickets: a hung call holds all of it, and docs (its own
        # pool) must not notice.
        backends = {"tickets": {"timeout_s": 3, "max_connections": 1}}
        async with make_stack.of(federated_stack, backends=backends) as fed:
            token = fed.token()
            status, _, envelope = await fed.modern_call(token, "tickets__create", {"text": "a"})
            assert status == 200 and envelope["result"]["isError"] is False
            fed.tickets.fault = fault
            failing = asyncio.create_task(fed.modern_call(token, "tickets__create", {"text": "b"}))
            if fault == "slow":
                await asyncio.wait_for(fed.tickets.slow_started.wait(), 10)
            # While tickets fails (or hangs), docs' calls and the listing go on unaffected.
            status, _, envelope = await fed.modern_call(token, "docs__search", {"text": "c"})
            assert status == 200 and _text(envelope) == '{"text": "c"}'
            assert await fed.listed(token) == MERGED
            if fault == "slow":
                # Generous: the docs call and the listing were answered before tickets' 3 s
                # deadline, so they did not wait for it.
                assert not failing.done()
            status, headers, envelope = await failing
            assert status == 200 and headers["Content-Type"].startswith("application/json")
            assert envelope["result"] == {
                "content": [{"type": "text", "text": text}],
                "isError": True,
                "resultType": "complete",
                "_meta": envelope["result"]["_meta"],
            }
            # The failing backend's catalog is still served; docs is still called.
            status, _, envelope = await fed.modern_call(token, "docs__echo", {"text": "d"})
            assert status == 200 and envelope["result"]["isError"] is False
            metrics = await fed.metrics()
        outcome = (
            "timeout"
            if fault == "slow"
            else ("too_large" if fault == "oversized" else "upstream_error")
        )
        assert (
            _sample(
                metrics,
                "mcp_gateway_backend_requests_total",
                backend="tickets",
                tool="tickets__create",
                outcome=outcome,
            )
            == 1.0
        )
        assert (
            _sample(
                metrics,
                "mcp_gateway_backend_requests_total",
                backend="docs",
                outcome="ok",
                tool="docs__search",
            )
            == 1.0
        )


class TestPolicyOnExposedNames:
    POLICY = """
version: 1
baseline_scopes: [mcp:access]
tools:
  docs__search: {scopes: [docs:read]}
  "tickets__*": {scopes: [tickets:write]}
  "tickets__admin_*": {scopes: [tickets:admin], clients: [ops-console]}
"""

    @pytest.mark.row("tool_insufficient_scope")
    async def test_rules_and_globs_match_prefixed_names_and_explain_agrees(
        self,
        tmp_path: Path,
        make_stack: MakeStack,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
    ) -> None:
        tickets = LegacyUpstream(
            accepted=set(), tools=[echo_tool("create"), echo_tool("admin_purge")]
        )
        audit = tmp_path / "audit.jsonl"
        async with make_stack.of(
            federated_stack,
            tickets=tickets,
            policy=self.POLICY,
            gateway={"audit": {"sink": "file", "path": str(audit)}},
        ) as fed:
            reader = fed.token(scopes("docs:read"))
            # docs__echo has no rule (hidden); tickets__* needs tickets:write (not listed).
            assert await fed.listed(reader) == ["docs__search"]
            status, headers, envelope = await fed.modern_call(reader, "tickets__create")
            assert status == 403
            assert 'error="insufficient_scope"' in headers["WWW-Authenticate"]
            assert 'scope="mcp:access tickets:write"' in headers["WWW-Authenticate"]
            assert envelope["error"]["code"] == -31403
            status, _, envelope = await fed.modern_call(reader, "docs__echo")
            assert (status, envelope["error"]["code"]) == (400, -32602)

            writer = fed.token(scopes("tickets:write", "tickets:admin"))
            # The more specific glob applies to tickets__admin_purge: only ops-console sees it.
            assert await fed.listed(writer) == ["tickets__create"]
            status, _, envelope = await fed.modern_call(writer, "tickets__create", {"text": "t"})
            assert status == 200 and envelope["result"]["isError"] is False
            status, _, envelope = await fed.modern_call(writer, "tickets__admin_purge")
            assert (status, envelope["error"]["code"]) == (400, -32602)
            ops = fed.token(scopes("tickets:write", "tickets:admin"), client_id="ops-console")
            assert await fed.listed(ops) == ["tickets__admin_purge", "tickets__create"]

            # policy explain evaluates the same exposed names (a tools/list result as catalog).
            _, _, everything = await fed.modern(ops, "tools/list")
            catalog = tmp_path / "catalog.json"
            catalog.write_text(json.dumps(everything["result"]))
            capsys.readouterr()
            # main() would configure structlog globally for the rest of the session.
            monkeypatch.setattr("gateway.commands.cli.configure", lambda *args, **kwargs: None)
            code = main(
                [
                    "policy",
                    "explain",
                    "--config",
                    str(fed.stack.config_path),
                    "--scopes",
                    "mcp:access docs:read",
                    "--all",
                    "--catalog-file",
                    str(catalog),
                    "--json",
                ]
            )
            report = json.loads(capsys.readouterr().out)
        assert code == 0
        verdicts = {item["name"]: (item["decision"], item["rule"]) for item in report["results"]}
        assert verdicts == {
            "tickets__admin_purge": ("hidden", "tickets__admin_*"),
            "tickets__create": ("step-up", "tickets__*"),
        }
        events = [json.loads(line) for line in audit.read_text().splitlines()]
        assert [(e["tool"], e.get("backend"), e["rule"], e["decision"]) for e in events] == [
            ("tickets__create", "tickets", "tickets__*", "deny"),
            ("docs__echo", None, None, "deny"),  # no rule: denied, and hidden
            ("tickets__create", "tickets", "tickets__*", "allow"),
            ("tickets__admin_purge", None, "tickets__admin_*", "deny"),
        ]
        assert [r.json["params"]["name"] for r in tickets.calls("tools/call")] == ["create"]

    async def test_a_rule_no_backend_can_match_is_logged_at_startup_and_after_a_reload(
        self,
        tmp_path: Path,
        make_stack: MakeStack,
        log_events: list[MutableMapping[str, Any]],
    ) -> None:
        # Issue 32 item 6: a rule for a backend prefix nobody has was found only at runtime.
        policy = FEDERATED_POLICY + "  wiki__search: {scopes: []}\n"
        async with make_stack.of(federated_stack, policy=policy) as fed:
            startup = [e["detail"] for e in log_events if e["event"] == "policy.rule_unreachable"]
            status, _, envelope = await fed.modern_call(fed.token(), "wiki__search")
            assert (status, envelope["error"]["code"]) == (400, -32602)
            # A reload that changes the set is checked again.
            (tmp_path / "policy.yaml").write_text(FEDERATED_POLICY + '  "wiki*": {scopes: []}\n')
            assert fed.stack.server.services.reload_policy is not None
            fed.stack.server.services.reload_policy()
            reloaded = [e["detail"] for e in log_events if e["event"] == "policy.rule_unreachable"]
        file = tmp_path / "policy.yaml"
        never = "can never match: no configured backend advertises such a name"
        shown = "(prefixes: 'docs__', 'tickets__')"
        line = FEDERATED_POLICY.count("\n") + 1  # the rule appended to the policy
        assert startup == [f"{file}:{line}:3: tools.wiki__search: {never} {shown}"]
        assert reloaded[1:] == [f"{file}:{line}:3: tools.wiki*: {never} {shown}"]


class TestPerToolLimitsAndRelays:
    POLICY = """
version: 1
baseline_scopes: [mcp:access]
tools:
  "docs__*": {scopes: []}
  "tickets__*": {scopes: [], rate_limit: 2/minute}
"""

    @pytest.mark.row("rate_limited")
    async def test_a_rate_limit_on_a_backend_glob_counts_per_exposed_tool(
        self, make_stack: MakeStack
    ) -> None:
        async with make_stack.of(federated_stack, policy=self.POLICY) as fed:
            token = fed.token("mcp:access")
            for _ in range(2):
                status, _, _ = await fed.modern_call(token, "tickets__create", {"text": "a"})
                assert status == 200
            status, headers, body = await fed.modern_call(token, "tickets__create")
            assert status == 429 and int(headers["Retry-After"]) >= 1
            # The row's JSON-RPC error, with the call's id (raised after the body was decoded).
            assert body["error"]["code"] == -31429 and body["id"] is not None
            assert (
                body["error"]["message"]
                == f"Too many requests, retry in {headers['Retry-After']} s"
            )
            # Another tool of the same glob has its own budget; the other backend is untouched.
            status, _, _ = await fed.modern_call(token, "tickets__echo", {"text": "b"})
            assert status == 200
            for _ in range(3):
                status, _, _ = await fed.modern_call(token, "docs__search", {"text": "c"})
                assert status == 200
        assert len(fed.tickets.calls("tools/call")) == 3

    @pytest.mark.row("missing_client_capability")
    async def test_a_modern_backends_minus_32021_is_relayed_through_the_federation(
        self, make_stack: MakeStack
    ) -> None:
        async with make_stack.of(federated_stack) as fed:
            fed.docs.fault = "missing_capability"
            status, _, envelope = await fed.modern_call(fed.token(), "docs__search", {"text": "a"})
            assert status == 400
            assert envelope["error"]["code"] == -32021
            assert envelope["error"]["data"]["requiredCapabilities"] == {
                "elicitation": {"form": {}}
            }
            # The client's declared capabilities reach the docs upstream (and only it).
            status, _, envelope = await fed.modern(
                fed.token(),
                "tools/call",
                {"name": "docs__search", "arguments": {}},
                name="docs__search",
                capabilities={"elicitation": {}},
            )
            assert status == 200 and envelope["result"]["isError"] is False
        sent = fed.docs.calls("tools/call")[-1].json["params"]["_meta"]
        assert sent["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {}}
