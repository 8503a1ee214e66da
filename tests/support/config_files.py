"""``gateway.yaml`` files written by the configuration tests, beside the fixture policy."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from gateway.config import load_config
from gateway.errors import ConfigError

__all__ = ["FIXTURES", "config_problems", "issuer_head", "write_config_text"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "config"


def issuer_head(secret_env: str = "TEST_INTROSPECTION_SECRET", policy: str = "policy.yaml") -> str:
    """The first six lines of a ``gateway.yaml``: resource, the introspecting issuer (its
    client secret in ``$secret_env``) and the policy; a test appends the backend part."""
    return (
        "resource: https://mcp.example.com/mcp\n"
        "issuer:\n"
        "  url: https://id.example.com\n"
        "  client_id: mcp-gateway\n"
        f"  client_secret: {{env: {secret_env}}}\n"
        f"policy: {policy}\n"
    )


def write_config_text(tmp_path: Path, text: str) -> Path:
    """``text`` as ``gateway.yaml`` in ``tmp_path``, the fixture ``policy.yaml`` beside it."""
    shutil.copy(FIXTURES / "policy.yaml", tmp_path / "policy.yaml")
    target = tmp_path / "gateway.yaml"
    target.write_text(text, encoding="utf-8")
    return target


def config_problems(tmp_path: Path, text: str, env: Mapping[str, str]) -> list[str]:
    """What loading ``text`` refuses, the file named ``gateway.yaml`` in each problem."""
    target = write_config_text(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_config(target, dict(env))
    return [p.replace(str(target), "gateway.yaml") for p in info.value.problems]
