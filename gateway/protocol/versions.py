"""MCP protocol revisions the gateway speaks (MCP 2026-07-28 basic/versioning.mdx).

Two eras share one endpoint (versioning.mdx §Terminology, "dual-era"): the stateless
``2026-07-28`` revision ("modern": the version rides in every request's ``_meta`` and the
``MCP-Protocol-Version`` header) and the ``initialize``-based revisions ("legacy").
"""

from __future__ import annotations

from typing import Final

__all__ = ["ASSUMED_LEGACY", "LEGACY", "MODERN", "SUPPORTED", "is_legacy"]

MODERN: Final = "2026-07-28"
"""The one stateless revision; requests carrying it run the modern validation ladder."""

LEGACY: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
"""Handshake revisions served on the legacy profile, newest first. ``initialize`` counter-offers
``LEGACY[0]`` when the client asks for a version outside this tuple (lifecycle.mdx
§Version Negotiation). ``2024-11-05`` (HTTP+SSE transport) is not served."""

ASSUMED_LEGACY: Final = "2025-03-26"
"""Version assumed for a request without ``MCP-Protocol-Version`` that is not ``initialize``
(2025-06-18 transports.mdx §Protocol Version Header: "the server SHOULD assume 2025-03-26")."""

SUPPORTED: Final[tuple[str, ...]] = (MODERN,)
"""What ``server/discover`` advertises in ``supportedVersions`` **and** what a ``-32022`` error
carries in ``data.supported``: one list, so ``data.supported`` ⊆ ``supportedVersions`` always
holds (the conformance suite checks it). Modern versions only (digest §6 item 7): both lists are
read by modern clients choosing the value for the next request's ``_meta``; listing a handshake
revision there would steer a modern client into a per-request ``_meta`` with a legacy version,
which the header router sends to the legacy profile where ``server/discover`` does not exist.
Legacy clients negotiate through ``initialize`` and never read either list."""


def is_legacy(version: str) -> bool:
    """True when ``version`` is a handshake revision the legacy profile serves."""
    return version in LEGACY
