"""Package metadata in its current form (PEP 639) and what the wheel must carry."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_license_is_an_spdx_expression_with_its_file_and_no_deprecated_forms() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"  # PEP 639; the {text = ...} table is deprecated
    assert project["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").lstrip().startswith("Apache License")
    assert not any(c.startswith("License ::") for c in project.get("classifiers", []))


def test_the_build_backend_understands_pep_639() -> None:
    (setuptools,) = [r for r in PYPROJECT["build-system"]["requires"] if "setuptools" in r]
    minimum = re.fullmatch(r"setuptools>=(\d+)(\.\d+)*", setuptools)
    assert minimum is not None and int(minimum.group(1)) >= 77


def test_the_wheel_carries_the_demo_policy_and_the_image_build_has_the_license() -> None:
    assert "dev/demo-policy.yaml" in PYPROJECT["tool"]["setuptools"]["package-data"]["gateway"]
    assert (ROOT / "gateway" / "dev" / "demo-policy.yaml").is_file()
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^COPY pyproject.toml README.md LICENSE \./$", dockerfile, re.MULTILINE)


def test_the_build_is_plain_setuptools_and_needs_no_compiler() -> None:
    """`pip install .` builds the pure package with setuptools alone (no in-tree backend, no
    setup.py, no extension modules)."""
    build = PYPROJECT["build-system"]
    assert build["build-backend"] == "setuptools.build_meta"
    assert "backend-path" not in build
    assert [r.split(">=")[0] for r in build["requires"]] == ["setuptools"]
    assert not (ROOT / "setup.py").exists()
    assert not (ROOT / "build_backend.py").exists()
