"""Description hygiene (gateway/backend/catalog/hygiene.py) and its use by the catalog builders."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.backend.catalog.hygiene import ELLIPSIS, clean_item, clean_text, has_hidden, is_hidden
from gateway.backend.catalog.surface_catalog import build_surface
from gateway.backend.catalog.tool_catalog import DEFAULT_MAX_DESCRIPTION_CHARS, build_catalog

# Every class the docs list, by name (docs/backends.md#description-hygiene).
HIDDEN = {
    "soft hyphen": "\u00ad",
    "zero-width space": "\u200b",
    "zero-width non-joiner": "\u200c",
    "zero-width joiner": "\u200d",
    "left-to-right mark": "\u200e",
    "right-to-left mark": "\u200f",
    "LRE": "\u202a",
    "RLE": "\u202b",
    "PDF": "\u202c",
    "LRO": "\u202d",
    "RLO": "\u202e",
    "word joiner": "\u2060",
    "invisible times": "\u2062",
    "invisible plus": "\u2064",
    "LRI": "\u2066",
    "RLI": "\u2067",
    "FSI": "\u2068",
    "PDI": "\u2069",
    "BOM": "\ufeff",
    "Arabic letter mark": "\u061c",
    "tag block start (unassigned)": "\U000e0000",
    "language tag": "\U000e0001",
    "tag A": "\U000e0041",
    "cancel tag": "\U000e007f",
}


def tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "inputSchema": {"type": "object"}, **extra}


@pytest.mark.parametrize("char", list(HIDDEN.values()), ids=list(HIDDEN))
def test_each_hidden_class_is_removed(char: str) -> None:
    assert is_hidden(char) and has_hidden(f"a{char}b")
    cleaned = clean_text(f"read{char} the{char}{char} file")
    assert (cleaned.text, cleaned.removed, cleaned.truncated) == ("read the file", 3, False)


@pytest.mark.parametrize(
    "text",
    ["plain ASCII\twith\nwhitespace", "Größe, 日本語, émoji 🙂, עברית", "no-break\u00a0space"],
)
def test_visible_text_is_kept_exactly(text: str) -> None:
    assert not has_hidden(text)
    assert clean_text(text, 2048) == clean_text(text) and clean_text(text).text == text
    assert clean_text(text).removed == 0


def test_cap_at_and_just_past_the_limit() -> None:
    at = clean_text("x" * 100, 100)
    assert (at.text, at.truncated) == ("x" * 100, False)
    past = clean_text("x" * 101, 100)
    assert past.truncated and len(past.text) == 100 and past.text == "x" * 99 + ELLIPSIS
    # The cap counts characters after the clean: hidden ones do not use up the budget.
    assert clean_text("\u200b" + "x" * 100, 100) == type(at)("x" * 100, 1, False)
    # Characters, not bytes.
    assert clean_text("é" * 100, 100).truncated is False


def test_clean_item_covers_display_members_only() -> None:
    definition: dict[str, Any] = {
        "name": "n",
        "title": "T\u202eitle",
        "description": "d" * 70,
        "annotations": {"title": "\ufeffA", "readOnlyHint": True},
        "arguments": [{"name": "a\u200b", "description": "x\u2066y"}],
        "inputSchema": {"type": "object", "description": "\u200bkept"},
    }
    assert clean_item(definition, 64) == {"invisible", "truncated"}
    assert definition["title"] == "Title" and definition["annotations"]["title"] == "A"
    assert definition["description"] == "d" * 63 + ELLIPSIS
    # An argument's name is an identifier the caller sends back: never rewritten.
    assert definition["arguments"] == [{"name": "a\u200b", "description": "xy"}]
    assert definition["inputSchema"]["description"] == "\u200bkept"  # not covered (documented)
    assert clean_item({"name": "n", "description": "ok"}, 64) == frozenset()


def test_build_catalog_cleans_caps_and_refuses_hidden_names() -> None:
    build = build_catalog(
        [
            tool("search", title="Se\u200barch", description="Find \u202eelif\u202c files"),
            tool("long", description="y" * (DEFAULT_MAX_DESCRIPTION_CHARS + 1)),
            tool("edge", description="z" * DEFAULT_MAX_DESCRIPTION_CHARS),
            tool("del\u200bete", description="the twin"),
        ],
        prefix="docs__",
    )
    catalog = build.catalog
    assert sorted(catalog.names) == ["docs__edge", "docs__long", "docs__search"]
    search = catalog.get("docs__search")
    assert search is not None
    assert (search.definition["title"], search.definition["description"]) == (
        "Search",
        "Find elif files",
    )
    long = catalog.get("docs__long")
    assert long is not None and len(long.definition["description"]) == 2048
    edge = catalog.get("docs__edge")
    assert edge is not None and edge.definition["description"] == "z" * 2048
    assert build.sanitised == (
        ("docs__search", "invisible"),
        ("docs__long", "truncated"),
        ("del\\u200bete", "name_refused"),
    )
    assert build.dropped == (
        ("del\\u200bete", "tool name contains invisible or bidirectional characters"),
    )
    # The catalog version hashes the cleaned definition: stable across fetches of the same text.
    again = build_catalog(
        [tool("search", title="Se\u200barch", description="Find \u202eelif\u202c files")]
    )
    plain = build_catalog([tool("search", title="Search", description="Find elif files")])
    assert again.catalog.version == plain.catalog.version


def test_build_surface_cleans_prompts_resources_templates() -> None:
    part = build_surface(
        [
            {
                "name": "greet",
                "description": "Hi\u200b",
                "arguments": [{"name": "who", "title": "W\u2067ho"}],
            },
            {"name": "sp\u200by", "description": "hidden"},
        ],
        [{"uri": "file:///a", "name": "A\ufeff", "description": "r" * 65}],
        [{"uriTemplate": "file:///{x}", "name": "T", "title": "\u202dT"}],
        prefix="p__",
        backend="b",
        max_description_chars=64,
    )
    assert [p.name for p in part.prompts] == ["p__greet"]
    assert part.prompts[0].definition["description"] == "Hi"
    assert part.prompts[0].definition["arguments"] == [{"name": "who", "title": "Who"}]
    assert part.resources[0].definition["name"] == "A"
    assert part.resources[0].definition["description"] == "r" * 63 + ELLIPSIS
    assert part.templates[0].definition["title"] == "T"
    assert part.sanitised == (
        ("prompt", "greet", "invisible"),
        ("prompt", "sp\\u200by", "name_refused"),
        ("resource", "file:///a", "invisible"),
        ("resource", "file:///a", "truncated"),
        ("template", "file:///{x}", "invisible"),
    )
