"""Each key of gateway.yaml is declared once, as a field of a config dataclass
(gateway/config/declare.py): the JSON Schema (both copies) is written from the declarations, and
docs/configuration.md's table is checked against them."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

from gateway.config.loader import inspect_config

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"


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
