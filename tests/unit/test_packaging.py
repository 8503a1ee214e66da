"""Package metadata in its current form (PEP 639) and what the wheel must carry."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

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
    # setup.py and build_backend.py (the in-tree PEP 517 backend) are needed for any build.
    assert re.search(
        r"^COPY pyproject.toml setup.py build_backend.py README.md LICENSE \./$",
        dockerfile,
        re.MULTILINE,
    )
    assert PYPROJECT["build-system"]["backend-path"] == ["."]


def test_a_compiled_build_requires_mypy_and_the_stubs_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import build_backend

    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("MCP_GATEWAY_COMPILE", raising=False)
    assert build_backend._compile_requires() == []
    monkeypatch.setenv("MCP_GATEWAY_COMPILE", "1")
    wanted = build_backend._compile_requires()
    dev = PYPROJECT["project"]["optional-dependencies"]["dev"]
    # mypyc type-checks the compiled modules, which reach yaml: mypy and the stubs as dev pins them.
    assert {r for r in dev if r.startswith(("mypy", "types-PyYAML"))} <= set(wanted)
    assert set(PYPROJECT["project"]["dependencies"]) <= set(wanted)
