"""What a catalog lock holds back from one backend's snapshot (``catalog.on_change: hold``).

:func:`pin_tools` and :func:`pin_surface` turn a fetched snapshot into lock items
(:func:`gateway.backend.catalog.pinning.pin`, from the objects exactly as the upstream listed them);
:func:`without_held` leaves out of the snapshot every item that differs from the lock or is not
in it, so everything downstream sees it as absent. Pure: the refresher calls these once per
fetch or lock reload, never per request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from gateway.backend.catalog.exposed import OverrideMisfit
from gateway.backend.catalog.lock_watch import CatalogLock
from gateway.backend.catalog.pinning import Difference, Item, Key, OverrideSource, pin
from gateway.backend.catalog.surface_catalog import SurfacePart
from gateway.backend.catalog.tool_catalog import DEFAULT_MAX_DESCRIPTION_CHARS, ToolCatalog

__all__ = ["MAX_REPORTED_DIFFERENCES", "lock_report", "pin_surface", "pin_tools", "without_held"]


def pin_tools(
    backend: str,
    raw: Sequence[Any],
    catalog: ToolCatalog,
    overrides: OverrideSource | None = None,
    *,
    max_description_chars: int = DEFAULT_MAX_DESCRIPTION_CHARS,
) -> tuple[tuple[Item, ...], dict[Key, str]]:
    """The lock items of the catalog's tools, from the raw ``tools/list`` objects, each with
    its policy override applied; and, per item key, the tool's name in ``catalog`` (a renamed
    tool is pinned under its new name but held under its catalog name). A tool whose override
    does not fit is not pinned: the merge hides it anyway."""
    by_name = {t["name"]: t for t in raw if isinstance(t, dict) and isinstance(t.get("name"), str)}
    items: list[Item] = []
    names: dict[Key, str] = {}
    for tool in catalog:
        if tool.upstream_name not in by_name:
            continue
        override = overrides.override_for(tool.name) if overrides is not None else None
        try:
            item = pin(
                "tool",
                backend,
                by_name[tool.upstream_name],
                tool.name,
                override=override,
                max_description_chars=max_description_chars,
            )
        except OverrideMisfit:
            continue
        items.append(item)
        names[item.key] = tool.name
    return tuple(items), names


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
    catalog: ToolCatalog,
    surface: SurfacePart,
    differences: Sequence[Difference],
    tool_names: Mapping[Key, str],
) -> tuple[ToolCatalog, SurfacePart]:
    """The snapshot less every changed or new item (a removed one has nothing to hold);
    ``tool_names``: a tool item's name in ``catalog`` (:func:`pin_tools`)."""
    held = [d.key for d in differences if d.change != "removed"]
    if not held:
        return catalog, surface
    tools = {tool_names.get(key, key[2]) for key in held if key[0] == "tool"}
    others = {(kind, name) for kind, _, name in held if kind != "tool"}
    return (
        catalog.without(tools) if tools else catalog,
        dataclasses.replace(
            surface,
            prompts=tuple(p for p in surface.prompts if ("prompt", p.name) not in others),
            templates=tuple(t for t in surface.templates if ("template", t.uri) not in others),
        ),
    )


MAX_REPORTED_DIFFERENCES: Final = 50
"""Differences from the catalog lock listed per backend in ``/readyz`` (the rest counted)."""


def lock_report(pins: CatalogLock, differences: Sequence[Difference]) -> dict[str, Any]:
    """A backend's ``catalog_lock`` member of ``/readyz``."""
    listed = [
        {
            "kind": d.key[0],
            "name": d.key[2],
            "change": d.change,
            "sha256": d.live.sha256 if d.live else None,
            "locked_sha256": d.locked.sha256 if d.locked else None,
        }
        for d in differences[:MAX_REPORTED_DIFFERENCES]
    ]
    return {
        "on_change": pins.mode,
        "lock_version": pins.current().version,
        "held": sum(d.change != "removed" for d in differences) if pins.mode == "hold" else 0,
        "differences": listed,
        "more_differences": len(differences) - len(listed),
    }
