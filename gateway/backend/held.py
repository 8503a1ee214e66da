"""What a catalog lock holds back from one backend's snapshot (``catalog.on_change: hold``).

:func:`pin_tools` and :func:`pin_surface` turn a fetched snapshot into lock items
(:func:`gateway.backend.pinning.pin`, from the objects exactly as the upstream listed them);
:func:`without_held` leaves out of the snapshot every item that differs from the lock or is not
in it, so everything downstream sees it as absent. Pure: the refresher calls these once per
fetch or lock reload, never per request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from gateway.backend.catalog import ToolCatalog
from gateway.backend.pinning import Difference, Item, pin
from gateway.backend.surface_catalog import SurfacePart

__all__ = ["pin_surface", "pin_tools", "without_held"]


def pin_tools(backend: str, raw: Sequence[Any], catalog: ToolCatalog) -> tuple[Item, ...]:
    """The lock items of the catalog's tools, from the raw ``tools/list`` objects."""
    by_name = {t["name"]: t for t in raw if isinstance(t, dict) and isinstance(t.get("name"), str)}
    return tuple(
        pin("tool", backend, by_name[tool.upstream_name], tool.name)
        for tool in catalog
        if tool.upstream_name in by_name
    )


def pin_surface(
    backend: str, part: SurfacePart, prompts: Sequence[Any], templates: Sequence[Any]
) -> tuple[Item, ...]:
    """The lock items of the part's prompts and resource templates (not its resources: a
    resource list is data that changes, a template is a declared shape like a tool)."""
    raw_prompts = {p["name"]: p for p in prompts if isinstance(p, dict) and "name" in p}
    raw_templates = {
        t["uriTemplate"]: t for t in templates if isinstance(t, dict) and "uriTemplate" in t
    }
    items = [
        pin("prompt", backend, raw_prompts[p.upstream_name], p.name)
        for p in part.prompts
        if p.upstream_name in raw_prompts
    ]
    items.extend(
        pin("template", backend, raw_templates[t.upstream_uri], t.uri)
        for t in part.templates
        if t.upstream_uri in raw_templates
    )
    return tuple(items)


def without_held(
    catalog: ToolCatalog, surface: SurfacePart, differences: Sequence[Difference]
) -> tuple[ToolCatalog, SurfacePart]:
    """The snapshot less every changed or new item (a removed one has nothing to hold)."""
    held = {(d.key[0], d.key[2]) for d in differences if d.change != "removed"}
    if not held:
        return catalog, surface
    tools = {name for kind, name in held if kind == "tool"}
    return (
        catalog.without(tools) if tools else catalog,
        dataclasses.replace(
            surface,
            prompts=tuple(p for p in surface.prompts if ("prompt", p.name) not in held),
            templates=tuple(t for t in surface.templates if ("template", t.uri) not in held),
        ),
    )
