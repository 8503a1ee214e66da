"""The pinned catalog's pure parts: the pinned definition and its hash, the comparison, the
readable diff, and the lock file (stable bytes, every problem at its line)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from gateway.backend.catalog.held import pin_tools, without_held
from gateway.backend.catalog.lock_file import dump_lock, load_lock, write_lock
from gateway.backend.catalog.pinning import compare, pin, render_diff
from gateway.backend.catalog.surface_catalog import SurfacePart
from gateway.backend.catalog.tool_catalog import build_catalog
from gateway.errors import ConfigError
from gateway.seams import ToolOverride

TOOL = {
    "name": "search",
    "title": "Search",
    "description": "Search the docs.",
    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
    "icons": [{"src": "https://example.com/i.png"}],
    "_meta": {"x": 1},
}


def test_a_tool_pins_every_member_it_is_served_with_under_the_exposed_name() -> None:
    item = pin("tool", "docs", {**TOOL, "x-vendor": {"ui": 1}}, "docs__search")
    assert item.key == ("tool", "docs", "docs__search")
    assert item.definition == {**TOOL, "x-vendor": {"ui": 1}, "name": "docs__search"}
    canonical = json.dumps(
        item.definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode()
    assert item.sha256 == hashlib.sha256(canonical).hexdigest()
    # Key order changes nothing; any member a client is shown does.
    again = pin(
        "tool", "docs", {**dict(reversed(TOOL.items())), "x-vendor": {"ui": 1}}, "docs__search"
    )
    assert again.sha256 == item.sha256
    for member, value in (
        ("icons", []),
        ("_meta", {"ui": {"resourceUri": "ui://evil"}}),
        ("execution", {"taskSupport": "required"}),
        ("outputSchema", {"type": "object"}),
        ("x-vendor", {"ui": 2}),
    ):
        changed = pin(
            "tool", "docs", {**TOOL, "x-vendor": {"ui": 1}, member: value}, "docs__search"
        )
        assert changed.sha256 != item.sha256, member


def test_prompts_and_templates_pin_the_members_they_are_served_with() -> None:
    prompt = pin(
        "prompt",
        "b",
        {
            "name": "greet",
            "description": "Hi",
            "arguments": [
                {"name": "who", "required": True, "x-extra": 1},
                {"name": "why", "required": False},
            ],
            "icons": [],
            "_meta": {"k": "v"},
            "x-unserved": 1,
        },
        "p_greet",
    )
    # As build_surface serves it: unknown members (and required: false) are not served.
    assert prompt.definition == {
        "name": "p_greet",
        "description": "Hi",
        "arguments": [{"name": "who", "required": True}, {"name": "why"}],
        "icons": [],
        "_meta": {"k": "v"},
    }
    template = pin(
        "template",
        "b",
        {
            "uriTemplate": "f:///{x}",
            "name": "file",
            "mimeType": "text/plain",
            "annotations": {"a": 1},
            "_meta": {"k": 1},
            "x-unserved": 1,
        },
        "f:///{x}",
    )
    assert template.name == "f:///{x}"
    assert set(template.definition) == {"uriTemplate", "name", "mimeType", "annotations", "_meta"}


def test_an_invisible_character_is_a_change_and_the_diff_shows_it() -> None:
    locked = pin("tool", "b", TOOL, "search")
    live = pin("tool", "b", {**TOOL, "description": "Search the docs.\u200b\u202e"}, "search")
    new = pin("tool", "b", {**TOOL, "name": "other"}, "other")
    differences = compare([live, new], [locked, pin("prompt", "b", {"name": "gone"}, "gone")])
    assert [(d.change, d.key[2]) for d in differences] == [
        ("removed", "gone"),
        ("new", "other"),
        ("changed", "search"),
    ]
    text = render_diff(differences)
    assert "-description: Search the docs.\n" in text
    assert "+description: Search the docs.\\u200b\\u202e\n" in text
    assert "# prompt gone (backend b): removed\n" in text
    assert "\u200b" not in text
    assert compare([locked], [locked]) == ()
    assert render_diff(()) == ""


def test_the_lock_file_is_sorted_stable_and_round_trips(tmp_path: Path) -> None:
    items = [
        pin("tool", "b", {**TOOL, "name": "zeta", "description": "caf\u00e9 \u200b"}, "zeta"),
        pin("prompt", "a", {"name": "p"}, "p"),
        pin("tool", "a", TOOL, "search"),
    ]
    path = tmp_path / "catalog.lock.yaml"
    write_lock(path, items)
    text = path.read_text()
    assert text == dump_lock(reversed(items))  # order of the input does not matter
    assert text.isascii() and "\\u200B" in text  # hidden characters visible in the file
    assert text.index("kind: prompt") < text.index("name: search") < text.index("name: zeta")
    lock = load_lock(path)
    assert {key: item.sha256 for key, item in lock.items.items()} == {
        i.key: i.sha256 for i in items
    }
    assert lock.items[("tool", "b", "zeta")].definition["description"] == "caf\u00e9 \u200b"


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (
            lambda t: t.replace("description: Search the docs.", "description: Search all."),
            ":9:3: items[0].sha256: does not match the definition",
        ),
        (lambda t: t.replace("version: 2", "version: 3"), ":4:1: version: must be 2"),
        (lambda t: t.replace("version: 2", "version: true"), ":4:1: version: must be 2"),
        (lambda t: t.replace("kind: tool", "kind: widget"), ":6:3: items[0].kind: must be one of"),
        (lambda t: t + "extra: 1\n", ":22:1: extra: unknown key"),
        (
            lambda t: t.replace("  name: search\n", "  name: other\n", 1),
            ":10:3: items[0].definition: definition.name is not the item's name",
        ),
        (lambda t: t.replace("items:", "items: [", 1), ":"),
    ],
)
def test_a_bad_lock_is_refused_with_the_line_of_each_problem(
    tmp_path: Path, edit: object, problem: str
) -> None:
    path = tmp_path / "catalog.lock.yaml"
    write_lock(path, [pin("tool", "a", {k: v for k, v in TOOL.items() if k != "title"}, "search")])
    assert callable(edit)
    path.write_text(edit(path.read_text()))
    with pytest.raises(ConfigError) as info:
        load_lock(path)
    assert any(p.startswith(f"{path}{problem}") for p in info.value.problems), info.value.problems


def test_a_duplicate_item_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "catalog.lock.yaml"
    write_lock(path, [pin("prompt", "a", {"name": "p"}, "p")])
    text = path.read_text()
    path.write_text(text + text[text.index("- kind") :])
    with pytest.raises(ConfigError) as info:
        load_lock(path)
    assert info.value.problems == [
        f"{path}:12:3: items[1]: prompt 'p' of backend 'a' is listed twice"
    ]


class _Overrides:
    def __init__(self, **by_name: ToolOverride) -> None:
        self.by_name = by_name

    def override_for(self, tool: str) -> ToolOverride | None:
        return self.by_name.get(tool)


def test_an_override_is_part_of_the_pinned_definition_and_a_rename_its_name() -> None:
    plain = pin("tool", "b", TOOL, "search")
    described = pin("tool", "b", TOOL, "search", override=ToolOverride("p:1:1", description="D"))
    assert described.definition["description"] == "D" and described.sha256 != plain.sha256
    renamed = pin("tool", "b", TOOL, "search", override=ToolOverride("p:1:1", rename="find"))
    assert renamed.key == ("tool", "b", "find") and renamed.definition["name"] == "find"
    hidden = pin("tool", "b", TOOL, "search", override=ToolOverride("p:1:1", hidden=("q",)))
    assert hidden.definition["inputSchema"] == {"type": "object", "properties": {}}


def test_pin_tools_keys_a_renamed_tool_by_its_new_name_and_skips_a_misfit() -> None:
    tools = [TOOL, {**TOOL, "name": "other"}]
    catalog = build_catalog(tools, backend="b").catalog
    source = _Overrides(
        search=ToolOverride("p:1:1", rename="find"),
        other=ToolOverride("p:2:1", hidden=("nosuch",)),  # does not fit: not exposed
    )
    items, names = pin_tools("b", tools, catalog, source)
    assert [item.name for item in items] == ["find"]
    assert names == {("tool", "b", "find"): "search"}
    # Held under its catalog name (the merge renames it afterwards).
    (difference,) = compare(items, [])
    held, _ = without_held(catalog, SurfacePart(), [difference], names)
    assert sorted(held.names) == ["other"]


def test_a_lock_the_gateway_would_refuse_is_never_written(tmp_path: Path) -> None:
    deep: dict[str, object] = {"type": "object"}
    for _ in range(70):  # deeper than the YAML reader's bound (yaml_source.MAX_DEPTH)
        deep = {"type": "object", "properties": {"x": deep}}
    path = tmp_path / "catalog.lock.yaml"
    with pytest.raises(ConfigError) as info:
        write_lock(path, [pin("tool", "a", {**TOOL, "inputSchema": deep}, "search")])
    assert "nested deeper than 64 levels" in info.value.problems[0]
    assert list(tmp_path.iterdir()) == []  # neither the lock nor a temporary file
