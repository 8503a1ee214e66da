"""The merged tool catalog of every backend, under the policy's overrides.

:func:`merge_catalogs` turns each backend's catalog (:class:`Part`) into one
:class:`MergedCatalog`, in two passes:

1. **Overrides** (:mod:`.exposed`): each tool whose governing policy rule has an ``override:``
   is replaced by its exposed form (title, description, annotations, rename, fixed and hidden
   arguments). A tool the override does not fit is hidden and reported (:class:`Refusal`,
   logged by the federation as ``tool_override_refused``). Done here, once per catalog or
   policy change, never per request.
2. **Ambiguity** on the exposed names: a name is *ambiguous* when more than one backend could
   own it: two tools offer it (two backends, or a rename onto a name a tool already has), or a
   tool's name lies inside a longer prefix than its own backend's (``tickets__x`` from the
   unprefixed backend would shadow the ``tickets`` backend's namespace, and a policy rule
   ``tickets__*`` written for that backend would cover it). A renamed tool's own prefix is its
   backend's prefix only if the new name still starts with it, so a rename into another
   backend's namespace is ambiguous too. Every tool with an ambiguous name is hidden, from every
   backend involved: never silently routed to the wrong backend.

A rename is verbatim: ``override.rename`` is the whole exposed name, no backend prefix is added
(the rule is written for the prefixed name and names the new one in full).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gateway.backend.catalog.exposed import OverrideMisfit, exposed_tool
from gateway.backend.catalog.tool_catalog import DEFAULT_MAX_DESCRIPTION_CHARS, SortedTools
from gateway.jsonkit.write import canonical
from gateway.seams import Catalog, ToolDef, ToolOverride

__all__ = [
    "Collision",
    "MergedCatalog",
    "OverrideLookup",
    "Part",
    "Refusal",
    "merge_catalogs",
]

CollisionReason = Literal["same_name", "prefix"]

OverrideLookup = Callable[[str], ToolOverride | None]
"""The override for a tool's exposed name before any rename (``PolicySet.override_for``)."""


@dataclass(frozen=True, slots=True)
class Part:
    """One backend's contribution to the merged catalog."""

    backend: str
    prefix: str
    catalog: Catalog
    interval_s: float
    """Its refresh interval: how long its catalog is expected to stay as it is."""


@dataclass(frozen=True, slots=True)
class Collision:
    """One ambiguous exposed name and the backends that could own it (all of them hide it)."""

    tool: str
    backends: tuple[str, ...]
    reason: CollisionReason
    """``same_name``: several tools offer it; ``prefix``: it lies in another backend's
    prefix (offered by a backend whose prefix is a prefix of that one)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A tool hidden because its override does not fit its definition."""

    tool: str
    """The tool's name before the override."""
    backend: str
    reason: str
    """A fixed reason naming the argument (from the policy)."""
    where: str
    """``file:line:col`` of the ``override:``."""


class MergedCatalog(SortedTools):
    """The federation's catalog snapshot: implements :class:`gateway.seams.Catalog`."""

    __slots__ = ("collided", "collisions", "refusals", "ttl_ms")

    def __init__(
        self,
        tools: Sequence[ToolDef],
        *,
        version: str,
        ttl_ms: int | None,
        collisions: tuple[Collision, ...] = (),
        refusals: tuple[Refusal, ...] = (),
        collided: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(tools, version)
        self.ttl_ms = ttl_ms
        self.collisions = collisions
        self.refusals = refusals
        self.collided: Mapping[str, int] = collided or {}
        """Per backend: how many of its tools an ambiguous name hides."""

    def owner(self, name: str) -> str | None:
        """The name of the backend that serves ``name``, or None (unknown or hidden)."""
        tool = self._tools.get(name)
        return tool.backend if tool is not None else None


def merge_catalogs(
    parts: Sequence[Part],
    overrides: OverrideLookup | None = None,
    *,
    max_description_chars: int = DEFAULT_MAX_DESCRIPTION_CHARS,
) -> MergedCatalog:
    """Merge the parts' catalogs under ``overrides``: see the module docstring."""
    digest = hashlib.sha256()
    refusals: list[Refusal] = []
    exposed: list[tuple[Part, list[ToolDef]]] = []
    for part in parts:
        digest.update(f"{part.backend}\0{part.catalog.version}\n".encode())
        tools: list[ToolDef] = []
        for tool in part.catalog:
            override = overrides(tool.name) if overrides is not None else None
            if override is None:
                tools.append(tool)
                continue
            try:
                shown = exposed_tool(tool, override, max_description_chars=max_description_chars)
            except OverrideMisfit as exc:
                refusals.append(Refusal(tool.name, part.backend, str(exc), override.where))
                digest.update(f"refused\0{tool.name}\n".encode())
                continue
            tools.append(shown)
            digest.update(canonical(shown.definition) + b"\n")
        exposed.append((part, tools))
    found = _ambiguous(exposed, parts)
    kept: list[ToolDef] = []
    collided: dict[str, int] = {}
    for part, tools in exposed:
        for tool in tools:
            if tool.name in found:
                collided[part.backend] = collided.get(part.backend, 0) + 1
            else:
                kept.append(tool)
    for name in sorted(found):
        digest.update(f"hidden\0{name}\n".encode())
    intervals = [part.interval_s for part in parts]
    ttl_ms = int(min(intervals) * 1000) if intervals else None
    return MergedCatalog(
        kept,
        version=digest.hexdigest()[:16],
        ttl_ms=ttl_ms,
        collisions=tuple(found[name] for name in sorted(found)),
        refusals=tuple(refusals),
        collided=collided,
    )


def _ambiguous(
    exposed: list[tuple[Part, list[ToolDef]]], parts: Sequence[Part]
) -> dict[str, Collision]:
    producers: dict[str, list[str]] = {}
    for part, tools in exposed:
        for tool in tools:
            producers.setdefault(tool.name, []).append(part.backend)
    found: dict[str, Collision] = {
        name: Collision(name, tuple(dict.fromkeys(owners)), "same_name")
        for name, owners in producers.items()
        if len(owners) > 1
    }
    prefixed = [part for part in parts if part.prefix]
    for part, tools in exposed:
        for tool in tools:
            if tool.name in found:
                continue
            own = part.prefix if tool.name.startswith(part.prefix) else ""
            for other in prefixed:
                if len(other.prefix) > len(own) and tool.name.startswith(other.prefix):
                    owners = (part.backend, other.backend)
                    found[tool.name] = Collision(tool.name, owners, "prefix")
                    break
    return found
