"""The ``catalog:`` section: the pinned catalog's lock file and what a difference does.

``catalog: {lock: catalog.lock.yaml, on_change: hold, poll_s: 2}``. Without the section no lock
is read and nothing is compared (no cost at all). The lock file itself is read by
:mod:`gateway.backend.catalog.lock_file` when the gateway starts (a missing or invalid file is a
startup error then), not here: ``mcp-gateway catalog pin`` must load this configuration before the
file exists.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from gateway.config.builder import Builder
from gateway.config.declare import Key, fill

__all__ = ["CatalogConfig", "OnChange", "build_catalog"]

OnChange = Literal["hold", "warn", "allow"]


@dataclass(frozen=True, slots=True)
class CatalogConfig:
    lock: Annotated[Path, Key(required=True, min_length=1)]
    """The lock file (relative paths: to the configuration file's directory)."""
    on_change: OnChange = "hold"
    """``hold``: an item that differs from the lock (or is not in it) is hidden and refused as
    if absent until approved; ``warn``: served, logged, audited and counted; ``allow``: served,
    only shown by ``/readyz`` and ``catalog diff``."""
    poll_s: Annotated[float, Key(minimum=0, maximum=3600)] = 2.0
    """How often the lock file's stat signature is compared (0: never; reload on restart)."""


def build_catalog(b: Builder, raw: dict[str, Any] | None) -> CatalogConfig | None:
    if raw is None:
        return None
    return fill(b, CatalogConfig, raw, ("catalog",))
