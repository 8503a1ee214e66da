"""The merged catalog of several backends: order, owners, ambiguity, freshness, version."""

from __future__ import annotations

import time
from typing import Any

import pytest

from gateway.backend.catalog.tool_catalog import ToolCatalog, build_catalog
from gateway.backend.federation import Collision, FederatedBackend, Part, merge_catalogs
from gateway.outbound.client import Outbound
from gateway.seams import Principal, RequestContext, ToolCall, ToolDef
from tests.support.backend_member import backend_member


def tool(name: str) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}}


def catalog(backend: str, prefix: str, *names: str) -> ToolCatalog:
    return build_catalog([tool(n) for n in names], prefix=prefix, backend=backend).catalog


def part(backend: str, prefix: str, *names: str, interval_s: float = 300.0) -> Part:
    return Part(backend, prefix, catalog(backend, prefix, *names), interval_s)


class TestMerge:
    def test_one_sorted_list_of_exposed_names_each_with_its_owner(self) -> None:
        merged = merge_catalogs(
            [part("tickets", "tickets__", "create", "echo"), part("docs", "docs__", "search")]
        )
        assert [t.name for t in merged] == ["docs__search", "tickets__create", "tickets__echo"]
        assert [t.backend for t in merged] == ["docs", "tickets", "tickets"]
        echo = merged.get("tickets__echo")
        assert echo is not None and echo.upstream_name == "echo"
        assert merged.owner("docs__search") == "docs"
        assert merged.owner("search") is None
        assert merged.collisions == () and len(merged) == 3

    def test_a_name_two_backends_offer_is_hidden_on_both(self) -> None:
        merged = merge_catalogs([part("a", "", "x", "only_a"), part("b", "", "x", "only_b")])
        assert [t.name for t in merged] == ["only_a", "only_b"]
        assert merged.collisions == (Collision("x", ("a", "b"), "same_name"),)
        assert merged.get("x") is None and "x" not in merged

    def test_a_name_inside_another_backends_prefix_is_hidden_even_without_a_twin(self) -> None:
        merged = merge_catalogs(
            [
                part("legacy", "", "docs__search", "docs__ghost", "free"),
                part("docs", "docs__", "search"),
            ]
        )
        assert [t.name for t in merged] == ["free"]
        assert merged.collisions == (
            Collision("docs__ghost", ("legacy", "docs"), "prefix"),
            Collision("docs__search", ("legacy", "docs"), "same_name"),
        )

    def test_prefixes_that_do_not_start_one_another_never_collide(self) -> None:
        merged = merge_catalogs([part("ab", "ab_", "x"), part("ac", "ac_", "x")])
        assert [t.name for t in merged] == ["ab_x", "ac_x"] and merged.collisions == ()

    def test_the_ttl_is_the_shortest_refresh_interval_of_the_parts(self) -> None:
        merged = merge_catalogs(
            [part("a", "a.", "x", interval_s=300.0), part("b", "b.", "y", interval_s=12.5)]
        )
        assert merged.ttl_ms == 12_500
        assert merge_catalogs([]).ttl_ms is None

    def test_the_version_follows_the_parts_and_the_hidden_names(self) -> None:
        a, b = part("a", "a.", "x"), part("b", "b.", "y")
        first = merge_catalogs([a, b])
        assert merge_catalogs([a, b]).version == first.version
        assert merge_catalogs([a, part("b", "b.", "y", "z")]).version != first.version
        # Same tools, different owners: a different catalog.
        assert merge_catalogs([part("b", "a.", "x"), part("a", "b.", "y")]).version != (
            first.version
        )


class TestFederatedBackend:
    async def test_members_merge_and_a_tool_of_no_member_is_refused_without_a_call(self) -> None:
        outbound = Outbound()
        try:
            docs, tickets = (
                backend_member("docs", outbound, "docs__"),
                backend_member("tickets", outbound, "t."),
            )
            fed = FederatedBackend([docs, tickets], readiness="any")
            assert len(fed.catalog()) == 0 and not fed.ready
            assert fed.readiness() == {"docs": False, "tickets": False}
            assert fed.member("docs") is docs and fed.member("nope") is None
            ctx = RequestContext(
                request_id="r", trace_id="t" * 32, span_id="s" * 16, started=0.0, client_ip="::1"
            )
            stray = ToolDef(name="x", definition={"name": "x"}, backend="elsewhere")
            call = ToolCall(tool=stray, arguments={}, era="modern", protocol_version="2026-07-28")
            result = await fed.call_tool(call, _principal(), ctx, time.monotonic() + 1)
            assert result == {
                "content": [{"type": "text", "text": "Upstream tool failed"}],
                "isError": True,
            }
            assert ctx.outcome == "upstream_error"
        finally:
            await outbound.close()

    async def test_names_must_be_unique_and_there_must_be_one(self) -> None:
        outbound = Outbound()
        try:
            with pytest.raises(ValueError, match="unique"):
                FederatedBackend(
                    [backend_member("a", outbound, "a."), backend_member("a", outbound, "b.")]
                )
            with pytest.raises(ValueError, match="at least one"):
                FederatedBackend([])
        finally:
            await outbound.close()


def _principal() -> Principal:
    return Principal(
        subject="s",
        client_id=None,
        scopes=frozenset(),
        expires_at=4e9,
        issuer="i",
        fingerprint="f",
    )
