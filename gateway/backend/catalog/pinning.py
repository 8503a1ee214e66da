"""The pinned catalog's pure logic: what an item's definition is for the lock, its hash, the
comparison of what a backend offers now with the lock, and the readable diff of the two.

An *item* is a tool, a prompt or a resource template of one backend, keyed by
``(kind, backend, name)``: ``name`` is the exposed (prefixed) name of a tool or prompt, and a
template's ``uriTemplate`` as the backend lists it. Its pinned definition is the whole object
the gateway serves to clients, every member of it (``_meta``, ``icons``, ``execution`` and
members no revision defines included: a client sees them all, an MCP Apps host renders what
``_meta`` points to), with the backend's text as it sent it, *before* the description hygiene
of :mod:`.hygiene`: a backend that adds invisible characters has changed its definition, which
a review must see, although the gateway would strip them. A tool is served with every member
the backend listed; a prompt or template with the members :mod:`.surface_catalog` keeps
(:func:`~gateway.backend.catalog.surface_catalog.served_definition`), so a member the gateway drops
is neither served nor pinned. The hash is the SHA-256 of the definition's canonical JSON (keys
sorted, no whitespace, UTF-8).

A tool is pinned as clients are shown it: with the policy's ``override:`` applied
(:func:`gateway.backend.catalog.exposed.exposed_definition`), under its exposed (renamed) name.

Nothing here does I/O, logging or metrics (:mod:`.lock_file` reads and writes lock files,
:mod:`.lock_watch` keeps one loaded and reports differences).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from gateway.backend.catalog.exposed import exposed_definition
from gateway.backend.catalog.surface_catalog import served_definition
from gateway.backend.catalog.tool_catalog import DEFAULT_MAX_DESCRIPTION_CHARS
from gateway.jsonkit.write import canonical, plain_copy
from gateway.observability.lines import printable
from gateway.seams import ToolOverride

__all__ = [
    "KINDS",
    "Change",
    "Difference",
    "Item",
    "Key",
    "Kind",
    "OverrideSource",
    "compare",
    "digest",
    "pin",
    "render_diff",
    "review_text",
]

Kind = Literal["tool", "prompt", "template"]
KINDS: Final[tuple[Kind, ...]] = ("tool", "prompt", "template")
Key = tuple[str, str, str]
"""(kind, backend, name)."""
Change = Literal["changed", "new", "removed"]


@dataclass(frozen=True, slots=True)
class Item:
    """One pinned item: in a lock file, or what a backend offers now."""

    kind: Kind
    backend: str
    name: str
    definition: Mapping[str, Any]
    sha256: str

    @property
    def key(self) -> Key:
        return (self.kind, self.backend, self.name)


@dataclass(frozen=True, slots=True)
class Difference:
    """One item whose live definition is not the locked one."""

    change: Change
    """``changed``: in both, different hashes; ``new``: live, not in the lock; ``removed``: in
    the lock, not offered any more (nothing to hold: shown by ``catalog diff``)."""
    locked: Item | None
    live: Item | None

    @property
    def item(self) -> Item:
        found = self.live if self.live is not None else self.locked
        assert found is not None
        return found

    @property
    def key(self) -> Key:
        return self.item.key


def digest(definition: Mapping[str, Any]) -> str:
    """The hex SHA-256 of the definition's canonical JSON."""
    return hashlib.sha256(canonical(definition)).hexdigest()


class OverrideSource(Protocol):
    """Where a tool's ``override:`` comes from: the current policy set
    (``gateway.policy.policy_set.PolicySet``), by the tool's exposed name before any rename (the
    backend's prefix + its own name); a new object per loaded policy version, so its identity
    says when to apply it again (the lock here, the merge in :mod:`.federation`)."""

    def override_for(self, tool: str) -> ToolOverride | None: ...


def pin(
    kind: Kind,
    backend: str,
    raw: Mapping[str, Any],
    exposed_name: str,
    *,
    override: ToolOverride | None = None,
    max_description_chars: int = DEFAULT_MAX_DESCRIPTION_CHARS,
) -> Item:
    """The pinned item of one raw listed object (already accepted by the catalog builders, so
    plain JSON): every member the gateway serves of it (module docstring), ``name`` the
    exposed one (a template keeps its own).

    A tool's ``override`` is applied first
    (:func:`gateway.backend.catalog.exposed.exposed_definition`, the function the merge uses), so
    the lock pins what clients are shown and an override change is a reviewed change too; a renamed
    tool is pinned under its new name. Raises
    :class:`~gateway.backend.catalog.exposed.OverrideMisfit` when the override does not fit (the
    tool is not exposed at all then)."""
    definition = dict(raw) if kind == "tool" else served_definition(kind, raw)
    if kind != "template":
        definition["name"] = exposed_name
    if kind == "tool" and override is not None:
        definition = exposed_definition(
            definition, override, max_description_chars=max_description_chars
        )
    # A private copy (nothing shared with the parser), in canonical form.
    plain: dict[str, Any] = plain_copy(definition, sort_keys=True)
    name = str(raw.get("uriTemplate", exposed_name)) if kind == "template" else plain["name"]
    return Item(kind, backend, name, plain, digest(plain))


def compare(live: Iterable[Item], locked: Iterable[Item]) -> tuple[Difference, ...]:
    """Every difference between ``live`` and ``locked``, sorted by key."""
    now = {item.key: item for item in live}
    then = {item.key: item for item in locked}
    out: list[Difference] = []
    for key in sorted(now.keys() | then.keys()):
        before, after = then.get(key), now.get(key)
        if before is None:
            out.append(Difference("new", None, after))
        elif after is None:
            out.append(Difference("removed", before, None))
        elif before.sha256 != after.sha256:
            out.append(Difference("changed", before, after))
    return tuple(out)


def review_text(definition: Mapping[str, Any] | None) -> list[str]:
    """A definition as lines a person can review: each member on its own, a text member's
    lines as they are, schemas and other structures as indented JSON. Characters that print
    as nothing (controls, format characters such as zero-width or bidirectional ones) are
    shown as ``\\uXXXX``, so a hidden change is a visible line of the diff."""
    if definition is None:
        return []
    lines: list[str] = []
    for key in sorted(definition):
        value = definition[key]
        if isinstance(value, str):
            text = value.split("\n")
            if len(text) == 1:
                lines.append(f"{key}: {printable(value)}")
            else:
                lines.append(f"{key}: |")
                lines.extend("  " + printable(line) for line in text)
        else:
            rendered = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
            lines.append(f"{key}:")
            lines.extend("  " + printable(line) for line in rendered.split("\n"))
    return lines


def render_diff(differences: Iterable[Difference]) -> str:
    """A unified diff per item, lock (``---``) against live (``+++``)."""
    out: list[str] = []
    for difference in differences:
        kind, backend, name = difference.key
        label = f"{kind} {name} (backend {backend})"
        before = review_text(difference.locked.definition if difference.locked else None)
        after = review_text(difference.live.definition if difference.live else None)
        out.append(f"# {label}: {difference.change}")
        out.extend(
            difflib.unified_diff(
                before, after, fromfile=f"lock: {label}", tofile=f"live: {label}", lineterm="", n=3
            )
        )
    return "\n".join(out) + ("\n" if out else "")
