"""Each key of gateway.yaml is declared once, as a field of a config dataclass
(gateway/config/declare.py): the JSON Schema (both copies) is written from the declarations, and
docs/configuration.md's table is checked against them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, get_args, get_origin

import pytest

from gateway.config import Rate
from gateway.config.declare import Key
from gateway.config.loader import inspect_config
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"


def _script() -> ModuleType:
    return load_script("config_schema")


SCRIPT = _script()


def test_both_copies_of_the_schema_are_written_from_the_declarations() -> None:
    text = SCRIPT.render()
    for path in SCRIPT.TARGETS:
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is out of date: run .venv/bin/python "
            "scripts/config_schema.py"
        )


def test_a_value_of_the_wrong_type_does_not_hide_the_other_problems_of_its_section(
    tmp_path: Path,
) -> None:
    # The section is read as declared before its checks run; a value the schema refused keeps
    # its default there, so the missing secret of the same section is still reported.
    shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    target = tmp_path / "gateway.yaml"
    text = (FIXTURES / "minimal.yaml").read_text(encoding="utf-8")
    target.write_text(text.replace("  client_id:", "  clock_skew_s: soon\n  client_id:"))
    report = inspect_config(target, {"TEST_BACKEND_TOKEN": "t"})
    assert report.problems == (
        f'{target}:5:3: issuer.clock_skew_s: "soon" is not an integer',
        f"{target}:7:3: issuer.client_secret: environment variable "
        "TEST_INTROSPECTION_SECRET is not set",
    )


def _rows() -> dict[str, list[str]]:
    """Key -> the cells (Key, Type, Default, Example, Meaning) of its configuration.md row."""
    rows = {}
    for line in (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8").splitlines():
        match = SCRIPT._ROW.match(line)
        if match is not None:
            rows[match.group(1)] = [c.strip() for c in SCRIPT._CELL.split(line.strip()[1:-1])]
    return rows


def _spelled(value: Any) -> str | None:
    """A default as the reference writes it (in backticks), or None when it has no spelling."""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int | float):
        return f"`{_number(value)}`"
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    if isinstance(value, Rate):
        unit = {1.0: "second", 60.0: "minute", 3600.0: "hour"}[value.per_s]
        return f"`{value.count}/{unit}`"
    if isinstance(value, tuple) and all(isinstance(item, str) for item in value):
        return f"`[{', '.join(value)}]`" if value else None
    return None


def _bounds(key: Key) -> list[str]:
    """The bounds a key's Type cell has to name, as numbers."""
    if key.ref == "seconds":
        return []  # "seconds": more than 0, at most a day, as the reference's rules say
    limits = [key.minimum, key.maximum, key.max_length, key.max_items, key.max_properties]
    limits += [key.min_items if key.min_items != 1 else None, key.min_properties]
    if key.exclusive_minimum not in (None, 0):
        limits.append(key.exclusive_minimum)
    return [_number(limit) for limit in limits if limit is not None]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


DECLARED = SCRIPT.declared_keys()


@pytest.mark.parametrize("declared", DECLARED, ids=[d.path for d in DECLARED])
def test_the_reference_states_each_keys_type_bounds_and_default_as_declared(declared: Any) -> None:
    row = _rows().get(declared.path)
    assert row is not None, f"docs/configuration.md has no row for `{declared.path}`"
    _, shown_type, shown_default, _, meaning = row
    assert meaning, declared.path
    plain = shown_type.replace(",", "")
    missing = [number for number in _bounds(declared.key) if number not in plain]
    assert missing == [], f"Type of `{declared.path}` does not name its bounds {missing}"
    if declared.key.ref == "seconds":
        assert "seconds" in shown_type
    # "**required** unless `issuers`": the file needs one of two keys (the builder checks it).
    required = re.search(r"\*\*required\*\*(?! (unless|when|with))", shown_type) is not None
    assert (declared.key.required is True) == required, f"required: `{declared.path}`"
    if get_origin(declared.type) is Literal:
        assert all(f"`{value}`" in shown_type for value in get_args(declared.type))
    spelled = _spelled(declared.default)
    if spelled is None or (spelled == '`""`' and not shown_default.startswith("`")):
        return
    if declared.key.shorthand is True and isinstance(declared.default, tuple):
        spelled = f"`{declared.default[0]}`" if len(declared.default) == 1 else spelled
    if isinstance(declared.default, int | float) and re.fullmatch(r"`[0-9.]+`", shown_default):
        assert float(shown_default.strip("`")) == declared.default, f"`{declared.path}`"
    elif re.fullmatch(r"`[^`]*`", shown_default):
        assert shown_default == spelled, f"Default of `{declared.path}`"
    else:
        assert spelled in shown_default, f"Default of `{declared.path}`: {shown_default}"
