"""Tool catalog validation (2026-07-28 tools.mdx §Tool) and the jsonschema-rs validators."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.backend.catalog.tool_catalog import MAX_TOOL_BYTES, MAX_TOOLS, build_catalog


def tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}, **extra}


def test_the_catalog_is_sorted_and_versioned_by_content() -> None:
    first = build_catalog([tool("b"), tool("a")]).catalog
    again = build_catalog([tool("a"), tool("b")]).catalog
    changed = build_catalog([tool("a"), tool("b", description="new")]).catalog
    assert [t.name for t in first] == ["a", "b"]
    assert len(first) == 2 and first.get("a") is not None and first.get("zz") is None
    assert first.version == again.version != changed.version


def test_the_prefix_is_advertised_and_the_upstream_name_kept() -> None:
    catalog = build_catalog([tool("search")], prefix="docs.").catalog
    found = catalog.get("docs.search")
    assert found is not None
    assert found.upstream_name == "search"
    assert found.definition["name"] == "docs.search"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        pytest.param("nope", "not an object", id="not an object"),
        pytest.param(tool(""), "1-64", id="empty name"),
        pytest.param(tool("a" * 65), "1-64", id="65 characters"),
        pytest.param(tool("a/b"), "1-64", id="slash"),
        pytest.param(tool("a b"), "1-64", id="space"),
        pytest.param({"name": "x"}, "inputSchema", id="no inputSchema"),
        pytest.param({"name": "x", "inputSchema": {"type": "array"}}, "inputSchema", id="array"),
        pytest.param(tool("x", outputSchema=[1]), "outputSchema", id="bad outputSchema"),
        pytest.param(
            {
                "name": "x",
                "inputSchema": {
                    "type": "object",
                    "properties": {"a": {"$ref": "https://evil.example/s.json"}},
                },
            },
            "compile",
            id="network $ref",
        ),
        pytest.param(
            {"name": "x", "inputSchema": {"type": "object", "properties": {"a": {"type": 5}}}},
            "compile",
            id="schema does not compile",
        ),
        pytest.param(
            {
                "name": "x",
                "inputSchema": {
                    "type": "object",
                    "properties": {"a": {"type": "number", "x-mcp-header": "A"}},
                },
            },
            "x-mcp-header",
            id="bad x-mcp-header",
        ),
    ],
)
def test_an_invalid_tool_is_dropped_with_a_reason(raw: Any, reason: str) -> None:
    build = build_catalog([raw, tool("ok")])
    assert [t.name for t in build.catalog] == ["ok"]
    assert len(build.dropped) == 1
    assert reason in build.dropped[0][1]


def test_a_64_character_name_is_kept() -> None:
    assert len(build_catalog([tool("a" * 64)]).catalog) == 1


def test_a_prefix_that_makes_the_name_too_long_drops_the_tool() -> None:
    build = build_catalog([tool("a" * 60)], prefix="abcde")
    assert len(build.catalog) == 0 and "prefixed" in build.dropped[0][1]


def test_duplicate_names_drop_every_copy() -> None:
    build = build_catalog([tool("a"), tool("a", description="x"), tool("b")])
    assert [t.name for t in build.catalog] == ["b"]
    assert build.dropped == (("a", "duplicate tool name"), ("a", "duplicate tool name"))


def test_definition_size_is_bounded_at_the_limit() -> None:
    def sized(n: int) -> dict[str, Any]:
        base = tool("big", description="")
        overhead = len(build_catalog([base]).catalog.get("big").definition.__repr__())  # type: ignore[union-attr]
        del overhead
        import json

        size = len(json.dumps(base, separators=(",", ":"), sort_keys=True))
        return tool("big", description="x" * (n - size))

    assert len(build_catalog([sized(MAX_TOOL_BYTES)]).catalog) == 1
    assert len(build_catalog([sized(MAX_TOOL_BYTES + 1)]).catalog) == 0


def test_at_most_max_tools_are_kept() -> None:
    build = build_catalog([tool(f"t{i}") for i in range(MAX_TOOLS + 1)])
    assert len(build.catalog) == MAX_TOOLS
    assert len(build.dropped) == 1


def test_validators_are_compiled_once_per_tool_and_check_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"type": "string", "pattern": "^(a+)+$"}},
        "required": ["q"],
        "additionalProperties": False,
    }
    catalog = build_catalog([{"name": "s", "inputSchema": schema}]).catalog
    validator = catalog.validator("s")
    assert validator is not None and validator is catalog.validator("s")
    assert validator.is_valid({"q": "aaa"})
    assert not validator.is_valid({"q": "a" * 40 + "!"})  # linear-time regex: no blow-up
    assert not validator.is_valid({})
    assert not validator.is_valid({"q": "a", "extra": 1})


def test_the_definition_is_a_private_copy() -> None:
    raw = tool("a")
    catalog = build_catalog([raw]).catalog
    raw["inputSchema"]["type"] = "array"
    assert catalog.get("a").definition["inputSchema"]["type"] == "object"  # type: ignore[union-attr]
