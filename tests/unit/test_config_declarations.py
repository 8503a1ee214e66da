"""Each key of gateway.yaml is declared once, as a field of a config dataclass
(gateway/config/declare.py): the JSON Schema (both copies) is written from the declarations, and
docs/configuration.md's table is checked against them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "config_schema", ROOT / "scripts" / "config_schema.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()


def test_both_copies_of_the_schema_are_written_from_the_declarations() -> None:
    text = SCRIPT.render()
    for path in SCRIPT.TARGETS:
        assert path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is out of date: run .venv/bin/python "
            "scripts/config_schema.py"
        )
