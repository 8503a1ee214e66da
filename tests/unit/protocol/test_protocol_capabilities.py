"""known_capabilities: the schema-known part of ClientCapabilities, rebuilt and bounded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway.protocol.capabilities import (
    MAX_DEPTH,
    MAX_ENTRIES,
    MAX_SETTINGS_BYTES,
    MAX_TOTAL_BYTES,
    known_capabilities,
)
from tests.support.schemas import validate_result


def test_the_known_keys_survive_and_validate_against_the_schema() -> None:
    raw = {
        "elicitation": {"form": {"a": 1}, "url": {}},
        "sampling": {"context": {}, "tools": {}},
        "roots": {},
        "experimental": {"x": {}},
        "extensions": {"io.modelcontextprotocol/oauth-client-credentials": {}},
    }
    out = known_capabilities(raw)
    assert out == raw
    validate_result("2026-07-28", "ClientCapabilities", out)
    assert out["elicitation"]["form"] is not raw["elicitation"]["form"]  # a private copy


@pytest.mark.parametrize(
    "raw",
    [None, [], "elicitation", {"elicitation": True}, {"sampling": []}, {"tasks": {}}],
)
def test_unknown_or_mistyped_entries_are_dropped(raw: Any) -> None:
    assert known_capabilities(raw) == {}


def test_settings_at_the_size_bound_are_kept_and_one_byte_more_is_emptied() -> None:
    def sized(n: int) -> dict[str, str]:
        overhead = len(json.dumps({"p": ""}, separators=(",", ":")))
        return {"p": "x" * (n - overhead)}

    assert known_capabilities({"elicitation": {"form": sized(MAX_SETTINGS_BYTES)}}) == {
        "elicitation": {"form": sized(MAX_SETTINGS_BYTES)}
    }
    assert known_capabilities({"elicitation": {"form": sized(MAX_SETTINGS_BYTES + 1)}}) == {
        "elicitation": {"form": {}}
    }


def test_settings_nested_past_the_depth_bound_are_emptied() -> None:
    deep: dict[str, Any] = {}
    for _ in range(MAX_DEPTH - 1):
        deep = {"n": deep}
    assert known_capabilities({"sampling": {"tools": deep}})["sampling"]["tools"] == deep
    assert known_capabilities({"sampling": {"tools": {"n": deep}}})["sampling"]["tools"] == {}


def test_maps_keep_at_most_max_entries_valid_names() -> None:
    names = {f"com.example/cap-{i:02}": {} for i in range(MAX_ENTRIES + 4)}
    names["bad\nname"] = {}
    names["x" * 129] = {}
    out = known_capabilities({"experimental": names})["experimental"]
    assert len(out) == MAX_ENTRIES
    assert all(name.startswith("com.example/cap-") for name in out)


def test_the_whole_object_stays_under_the_total_bound() -> None:
    big = {f"n{i:02}": {"v": "x" * 900} for i in range(MAX_ENTRIES)}
    out = known_capabilities({"roots": {}, "experimental": big, "extensions": big})
    assert out == {"roots": {}}
    assert len(json.dumps(out)) <= MAX_TOTAL_BYTES
