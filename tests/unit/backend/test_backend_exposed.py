"""The exposed definition of a tool under a policy ``override:``
(gateway.backend.catalog.exposed)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest

from gateway.backend.catalog.exposed import OverrideMisfit, exposed_definition, exposed_tool
from gateway.backend.catalog.tool_catalog import build_catalog
from gateway.seams import ToolDef, ToolOverride
from gateway.seams.backends import fold_argument

SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {"tenant": {"type": "string", "enum": ["acme", "globex"]}},
    "properties": {
        "query": {"type": "string", "x-mcp-header": "Query"},
        "tenant": {"type": "string", "$ref": "#/$defs/tenant", "x-mcp-header": "Tenant"},
        "limit": {"type": "integer", "maximum": 50},
        "debug": {"type": "boolean"},
    },
    "required": ["query", "tenant"],
}


def backend_tool(**extra: Any) -> ToolDef:
    raw = {
        "name": "search",
        "title": "Search",
        "description": "Backend text",
        "inputSchema": SCHEMA,
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
        "outputSchema": {"type": "object"},
        **extra,
    }
    build = build_catalog([raw], prefix="docs__", backend="docs")
    tool = build.catalog.get("docs__search")
    assert tool is not None, build.dropped
    return tool


def override(**kwargs: Any) -> ToolOverride:
    return ToolOverride(where="p.yaml:3:5", **kwargs)


def test_no_override_is_the_tool_itself() -> None:
    tool = backend_tool()
    assert exposed_tool(tool, None) is tool


def test_texts_annotations_and_rename() -> None:
    tool = backend_tool()
    exposed = exposed_tool(
        tool,
        override(
            title="Find documents",
            description="Searches the handbook.\u200b",
            annotations=MappingProxyType({"readOnlyHint": False, "title": "Finder"}),
            rename="find_docs",
        ),
    )
    d = exposed.definition
    assert exposed.name == d["name"] == "find_docs"
    assert exposed.upstream_name == "search" and exposed.backend == "docs"
    assert d["title"] == "Find documents"
    assert d["description"] == "Searches the handbook."  # same hygiene as backend text
    assert d["annotations"] == {"readOnlyHint": False, "openWorldHint": False, "title": "Finder"}
    assert d["inputSchema"] == SCHEMA and d["outputSchema"] == {"type": "object"}
    assert exposed.origin is tool and exposed.closed_arguments == frozenset()
    assert exposed.header_params == tool.header_params
    # The backend's definition is not modified.
    assert tool.definition["title"] == "Search" and tool.definition["annotations"]["readOnlyHint"]


def test_override_texts_are_capped() -> None:
    exposed = exposed_tool(backend_tool(), override(description="x" * 50), max_description_chars=10)
    assert exposed.definition["description"] == "x" * 9 + "\u2026"


def test_fixed_and_hidden_leave_the_advertised_schema() -> None:
    tool = backend_tool()
    exposed = exposed_tool(
        tool, override(fixed=MappingProxyType({"tenant": "acme"}), hidden=("debug",))
    )
    schema = exposed.definition["inputSchema"]
    assert set(schema["properties"]) == {"query", "limit"}
    assert schema["required"] == ["query"]
    assert schema["$defs"] == SCHEMA["$defs"]
    assert dict(exposed.fixed_arguments) == {"tenant": "acme"}
    assert exposed.closed_arguments == {"tenant", "debug"}
    # The Tenant header belongs to a fixed property: the caller sends none.
    assert [p.header for p in exposed.header_params] == ["Query"]
    assert [p.header for p in tool.header_params] == ["Query", "Tenant"]


@pytest.mark.parametrize(
    ("sent", "refused"),
    [
        (["tenant"], ("tenant",)),
        (["Tenant", "query"], ("tenant",)),  # case
        (["tenant ", " DEBUG\t"], ("debug", "tenant")),  # surrounding white space
        (["\uff54\uff45\uff4e\uff41\uff4e\uff54"], ("tenant",)),  # fullwidth (NFKC)
        (["TENAN\u0162"], ("tenant",)),  # T with cedilla: looks alike once the mark is gone
        (["t\u0435nant"], ("tenant",)),  # Cyrillic e: a look-alike of the same shape
        (["t\u0435nants"], ()),  # a look-alike of another length is another key
        (["query", "limit", "tenants"], ()),
    ],
)
def test_near_miss_spellings_of_a_closed_argument_are_refused_under_its_name(
    sent: list[str], refused: tuple[str, ...]
) -> None:
    exposed = exposed_tool(
        backend_tool(), override(fixed=MappingProxyType({"tenant": "acme"}), hidden=("debug",))
    )
    assert exposed.refused_arguments(sent) == refused


def test_fold_is_unicode_compatibility_caseless_matching() -> None:
    # The Kelvin sign and the long s fold like Go's encoding/json folds them; ß like "ss".
    assert fold_argument("\u212aey") == fold_argument("KEY") == "key"
    assert fold_argument("\u017fort") == "sort"
    assert fold_argument("Stra\u00dfe") == fold_argument("STRASSE")
    assert fold_argument("\u3000env\u00a0") == "env"  # ideographic and no-break spaces


def test_required_emptied_is_dropped() -> None:
    tool = backend_tool(
        inputSchema={
            "type": "object",
            "properties": {"tenant": {"type": "string"}},
            "required": ["tenant"],
        }
    )
    exposed = exposed_tool(tool, override(fixed=MappingProxyType({"tenant": "t"})))
    assert exposed.definition["inputSchema"] == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"fixed": {"nope": 1}}, "fixed argument 'nope' is not a property of the inputSchema"),
        ({"hidden": ("nope",)}, "hidden argument 'nope' is not a property of the inputSchema"),
        ({"hidden": ("query",)}, "hidden argument 'query' is required: fix it instead"),
        ({"fixed": {"tenant": "initech"}}, "fixed argument 'tenant': the value does not match"),
        ({"fixed": {"limit": 51}}, "fixed argument 'limit': the value does not match its schema"),
        ({"fixed": {"limit": "5"}}, "fixed argument 'limit': the value does not match its schema"),
    ],
)
def test_misfits(kwargs: dict[str, Any], reason: str) -> None:
    with pytest.raises(OverrideMisfit) as caught:
        exposed_tool(backend_tool(), override(**kwargs))
    assert str(caught.value).startswith(reason)


def test_fixed_value_at_the_bound_fits() -> None:
    exposed = exposed_tool(backend_tool(), override(fixed=MappingProxyType({"limit": 50})))
    assert exposed.fixed_arguments == {"limit": 50}


def test_exposed_definition_is_pure_and_plain() -> None:
    definition = {"name": "a", "inputSchema": {"type": "object", "properties": {"x": {}}}}
    out = exposed_definition(definition, override(hidden=("x",), title="T"))
    assert out == {"name": "a", "title": "T", "inputSchema": {"type": "object", "properties": {}}}
    assert definition["inputSchema"]["properties"] == {"x": {}}


def test_reapplying_starts_from_the_origin() -> None:
    tool = backend_tool()
    first = exposed_tool(tool, override(rename="one", title="One"))
    second = exposed_tool(first, override(rename="two"))
    assert second.name == "two" and second.origin is tool
    assert second.definition["title"] == "Search"
