"""The backends' catalogs fetched once, for ``mcp-gateway catalog pin | diff | approve``.

Built as :func:`~gateway.wiring.production.build_services` builds them (one
:class:`~gateway.backend.upstream_backend.UpstreamBackend` per configured backend, its service
credential, its deadlines, the policy's tool overrides applied: what clients are shown is what is
pinned), but fetched once: no background refresh, no listen stream, nothing served.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import gateway
from gateway.backend.catalog.lock_file import Lock
from gateway.backend.catalog.lock_watch import CatalogLock
from gateway.backend.catalog.pinning import Item
from gateway.backend.upstream_backend import UpstreamBackend
from gateway.config import Config
from gateway.outbound.client import Outbound
from gateway.policy.policy_loader import load_policy

__all__ = ["Fetched", "fetch_catalogs"]


@dataclass(frozen=True, slots=True)
class Fetched:
    """Every backend's pinnable items, and the backends whose catalog could not be listed."""

    items: tuple[Item, ...]
    failed: tuple[str, ...]


async def fetch_catalogs(config: Config, lock: Lock, path: Path) -> Fetched:
    """Fetch every backend's tools, prompts and resource templates once, under ``lock`` (read
    from ``path``). Raises :class:`~gateway.errors.ConfigError` for an invalid policy."""
    # The policy's tool overrides are part of what is pinned (what clients are shown).
    policy = load_policy(
        config.policy_paths,
        issuers=config.issuer_urls,
        guardrails=[processor.name for processor in config.guardrails],
    )
    outbound = Outbound(user_agent=f"mcp-resource-gateway/{gateway.__version__}")
    pins = CatalogLock(path, "allow", lock=lock)
    members = [
        UpstreamBackend(config, outbound, settings=s, pins=pins, overrides=policy)
        for s in config.backends
    ]
    try:
        fetched = await asyncio.gather(*(member.fetch() for member in members))
        failed = tuple(
            member.name
            for member, ok in zip(members, fetched, strict=True)
            if not ok or member.refresher.surface_failed
        )
        items = tuple(item for member in members for item in member.refresher.pinned())
    finally:
        await asyncio.gather(*(member.close() for member in members))
        await outbound.close()
    return Fetched(items, failed)
