"""setuptools' build backend, plus mypy (mypyc), the stub packages and the runtime dependencies
(whose types mypyc reads) as build requirements, but only when MCP_GATEWAY_COMPILE=1: a plain
build stays setuptools alone and needs no C compiler (setup.py does the compiling)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (the whole PEP 517 interface)


def _compile_requires() -> list[str]:
    if os.environ.get("MCP_GATEWAY_COMPILE") != "1":
        return []
    project = tomllib.loads(Path("pyproject.toml").read_text(encoding="utf-8"))["project"]
    # mypy and the stub packages as the dev extra pins them (mypyc type-checks what it compiles,
    # and the compiled modules reach yaml through the config layer).
    typing = [
        r for r in project["optional-dependencies"]["dev"] if r.startswith(("mypy", "types-"))
    ]
    return [*typing, *project["dependencies"]]


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    extra = _compile_requires()
    # setuptools runs setup.py to list its own requirements; mypy is not installed yet then.
    saved = os.environ.pop("MCP_GATEWAY_COMPILE", None)
    try:
        own = _setuptools.get_requires_for_build_wheel(config_settings)
    finally:
        if saved is not None:
            os.environ["MCP_GATEWAY_COMPILE"] = saved
    return [*own, *extra]
