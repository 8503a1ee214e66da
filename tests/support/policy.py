"""Helpers for the policy tests: write policy files, build principals."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from gateway.errors import ConfigError
from gateway.policy.policy_loader import load_policy
from gateway.policy.policy_set import PolicySet
from gateway.seams import Principal

__all__ = [
    "HEAD",
    "ISSUER",
    "minimal_config",
    "policy_from",
    "policy_problems",
    "policy_text",
    "who",
    "write_text",
]

ISSUER = "https://id.example.com"
"""The issuer of :func:`who`'s principals, and the first (only) one :func:`policy_from` loads
the policy for: plain ``subjects`` / ``clients`` entries are its names."""


HEAD = "version: 1\nbaseline_scopes: [mcp:access]\n"
"""The first two lines of a policy file, for tests that write the rest."""


def write_text(path: Path, text: str) -> Path:
    """Write dedented ``text`` to ``path`` (parents created) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def policy_text(*, baseline: str = "mcp:access", **sections: dict[str, str]) -> str:
    """A policy file: ``baseline`` scopes, and per section (``tools``, ``prompts``,
    ``resources``) each name or pattern with the scopes it needs (space-separated)."""
    lines = ["version: 1", f"baseline_scopes: [{', '.join(baseline.split())}]"]
    for section, rules in sections.items():
        lines.append(f"{section}:")
        lines += [
            f'  "{name}": {{scopes: [{", ".join(scopes.split())}]}}'
            for name, scopes in rules.items()
        ]
    return "\n".join(lines) + "\n"


def minimal_config(
    path: Path, secret_env: str, *, policy: str = "policies", extra: str = ""
) -> Path:
    """The smallest valid ``gateway.yaml`` (tests/fixtures/config/minimal.yaml's keys) at
    ``path``: both secrets read from ``$secret_env``, the policy at ``policy`` (relative to the
    file), ``extra`` YAML lines after them."""
    return write_text(
        path,
        f"""\
resource: https://mcp.example.com/mcp
issuer:
  url: {ISSUER}
  client_id: mcp-gateway
  client_secret: {{env: {secret_env}}}
backend:
  url: https://tools.example.com/mcp
  credential: {{type: bearer, token: {{env: {secret_env}}}}}
policy: {policy}
{extra}""",
    )


def policy_problems(tmp_path: Path, text: str, name: str = "p.yaml") -> list[str]:
    """What loading :data:`HEAD` + ``text`` (written to ``name``) refuses, each problem without
    the file's path (``line:col: ...``)."""
    path = write_text(tmp_path / name, HEAD + text)
    with pytest.raises(ConfigError) as caught:
        load_policy([path])
    return [problem.removeprefix(f"{path}:") for problem in caught.value.problems]


def policy_from(
    text: str, directory: Path, name: str = "policy.yaml", *, issuers: tuple[str, ...] = (ISSUER,)
) -> PolicySet:
    return load_policy([write_text(directory / name, text)], issuers=issuers)


def who(
    scopes: str = "", *, sub: str = "alice", client_id: str | None = "cli", issuer: str = ISSUER
) -> Principal:
    """A principal for evaluation (never expires; the policy does not look at expiry)."""
    return Principal(
        subject=sub,
        client_id=client_id,
        scopes=frozenset(scopes.split()),
        expires_at=math.inf,
        issuer=issuer,
        fingerprint="fp",
    )
