"""Helpers for the policy tests: write policy files, build principals."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from gateway.policy.loader import load_policy
from gateway.policy.model import PolicySet
from gateway.seams import Principal

__all__ = ["ISSUER", "policy_from", "who", "write_text"]

ISSUER = "https://id.example.com"
"""The issuer of :func:`who`'s principals, and the first (only) one :func:`policy_from` loads
the policy for: plain ``subjects`` / ``clients`` entries are its names."""


def write_text(path: Path, text: str) -> Path:
    """Write dedented ``text`` to ``path`` (parents created) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


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
