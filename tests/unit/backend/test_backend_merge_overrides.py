"""merge_catalogs under the policy's overrides: renames, collisions, refusals, versions."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from gateway.backend.catalog.tool_catalog import build_catalog
from gateway.backend.catalog.tool_merge import Collision, Part, Refusal, merge_catalogs
from gateway.seams import ToolOverride


def part(backend: str, prefix: str, *names: str) -> Part:
    tools = [
        {"name": n, "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}
        for n in names
    ]
    return Part(backend, prefix, build_catalog(tools, prefix=prefix, backend=backend).catalog, 60)


def lookup(**overrides: dict[str, Any]) -> Any:
    table = {
        name: ToolOverride(where=f"p.yaml:{i}:1", **kw)
        for i, (name, kw) in enumerate(overrides.items(), start=1)
    }
    return table.get


def test_without_overrides_the_backend_tools_are_served_as_they_are() -> None:
    docs = part("docs", "docs__", "a", "b")
    merged = merge_catalogs([docs], lookup())
    assert all(a is b for a, b in zip(merged, docs.catalog, strict=True))  # the same objects
    assert merge_catalogs([docs]).version == merged.version


def test_a_rename_is_verbatim_and_keeps_the_backend_name() -> None:
    merged = merge_catalogs([part("docs", "docs__", "a")], lookup(docs__a={"rename": "find"}))
    tool = merged.get("find")
    assert tool is not None and tool.upstream_name == "a" and tool.backend == "docs"
    assert merged.get("docs__a") is None and merged.owner("find") == "docs"


def test_renames_may_swap_names_within_a_backend() -> None:
    merged = merge_catalogs([part("d", "", "a", "b")], lookup(a={"rename": "b"}, b={"rename": "a"}))
    assert [(t.name, t.upstream_name) for t in merged] == [("a", "b"), ("b", "a")]
    assert merged.collisions == ()


def test_a_rename_onto_a_name_in_use_hides_both() -> None:
    merged = merge_catalogs([part("d", "", "a", "b")], lookup(a={"rename": "b"}))
    assert list(merged) == []
    assert merged.collisions == (Collision("b", ("d",), "same_name"),)
    assert merged.collided == {"d": 2}


def test_a_rename_into_another_backends_prefix_is_ambiguous() -> None:
    parts = [part("docs", "docs__", "a", "b"), part("tickets", "tickets__", "c")]
    merged = merge_catalogs(
        parts, lookup(docs__a={"rename": "tickets__z"}, docs__b={"rename": "docs__bee"})
    )
    assert sorted(merged.names) == ["docs__bee", "tickets__c"]
    assert merged.collisions == (Collision("tickets__z", ("docs", "tickets"), "prefix"),)


def test_an_unprefixed_backend_may_take_a_rename_outside_every_prefix() -> None:
    parts = [part("legacy", "", "old"), part("docs", "docs__", "a")]
    merged = merge_catalogs(parts, lookup(docs__a={"rename": "new"}, old={"rename": "docs__x"}))
    assert sorted(merged.names) == ["new"]
    assert [c.tool for c in merged.collisions] == ["docs__x"]


def test_a_misfit_is_refused_and_changes_the_version() -> None:
    docs = part("docs", "", "a", "b")
    merged = merge_catalogs([docs], lookup(a={"fixed": MappingProxyType({"nope": 1})}))
    assert sorted(merged.names) == ["b"]
    assert merged.refusals == (
        Refusal(
            "a", "docs", "fixed argument 'nope' is not a property of the inputSchema", "p.yaml:1:1"
        ),
    )
    assert merged.version != merge_catalogs([docs]).version


def test_an_override_change_changes_the_version() -> None:
    docs = part("docs", "", "a")
    first = merge_catalogs([docs], lookup(a={"title": "One"}))
    second = merge_catalogs([docs], lookup(a={"title": "Two"}))
    again = merge_catalogs([docs], lookup(a={"title": "One"}))
    assert len({first.version, second.version, merge_catalogs([docs]).version}) == 3
    assert first.version == again.version
