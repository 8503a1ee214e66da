"""The catalog lock file (``catalog.lock``): read it with a position for every problem, write it
sorted and stable (the same catalog always gives the same bytes, so a change is a reviewable
diff in version control).

Format (YAML; ``mcp-gateway catalog pin`` writes it, ``catalog approve`` updates it)::

    version: 2
    items:
    - kind: tool                 # tool | prompt | template
      backend: default           # the configured backend name
      name: search_docs          # exposed name (a template: its uriTemplate)
      sha256: 6f1e...            # of the definition's canonical JSON (pinning.py)
      definition: {...}          # every member clients are shown, as the backend sent it

Items are sorted by (kind, backend, name). Strings are written with every non-ASCII character
escaped (``"\\u200B"``), so a hidden character is visible in the file and in its diff.
A hand edit that leaves ``sha256`` and ``definition`` disagreeing is a load error: the hash is
what the gateway compares, the definition what a reviewer reads, and they must be the same.

A ``version: 1`` lock (written before every served member was pinned: its definitions hold
only the name, title, description, schemas, annotations and arguments) is still read, so an
upgraded gateway keeps serving what it pinned; its :attr:`Lock.format` is 1 and
:data:`OUTDATED` says what to do. It is never upgraded in place (the missing members can only
come from the live backends, which is what a review is for): each item that carries other
members differs from it and is held until approved, and the next ``catalog pin`` or
``catalog approve`` writes version 2.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from gateway.backend.catalog.pinning import KINDS, Item, Key, Kind, digest
from gateway.errors import ConfigError
from gateway.yaml_source import load_yaml

__all__ = [
    "EMPTY_LOCK",
    "FORMAT_VERSION",
    "OUTDATED",
    "Lock",
    "dump_lock",
    "load_lock",
    "write_lock",
]

FORMAT_VERSION: Final = 2
_READ_VERSIONS: Final = (1, FORMAT_VERSION)
OUTDATED: Final = (
    "lock version 1 pins only part of each definition; every member a client is shown "
    "(_meta, icons, execution, ...) is compared now, so an item with other members is held "
    "until approved: review with `mcp-gateway catalog diff`, then `catalog approve` (or "
    "`catalog pin`) writes version 2"
)
"""What a ``version: 1`` lock means for the operator (logged by ``serve``, printed by the
``catalog`` commands)."""
_SHA256: Final = re.compile(r"[0-9a-f]{64}")
_HEADER: Final = (
    "# mcp-gateway catalog lock: the tool, prompt and resource template definitions this\n"
    "# deployment has approved. Written by `mcp-gateway catalog pin` / `catalog approve`;\n"
    "# review changes with `mcp-gateway catalog diff` and commit this file.\n"
)


@dataclass(frozen=True, slots=True)
class Lock:
    """A loaded lock: its items by key, and a version (the hash of the file's bytes)."""

    items: Mapping[Key, Item] = field(default_factory=dict)
    version: str = ""
    source: str = ""
    format: int = FORMAT_VERSION
    """The file's ``version:`` (1: :data:`OUTDATED`)."""

    def for_backend(self, backend: str) -> list[Item]:
        return [item for key, item in self.items.items() if key[1] == backend]


EMPTY_LOCK: Final = Lock()


def load_lock(path: Path) -> Lock:
    """Read and check a lock file; raises :class:`ConfigError` listing every problem as
    ``file:line:col: key.path: message``."""
    doc = load_yaml(path)
    if doc.problems:
        raise ConfigError(list(doc.problems))
    value = doc.value
    if not isinstance(value, dict):
        doc.problem((), f"a catalog lock is a mapping with version: {FORMAT_VERSION} and items:")
        raise ConfigError(list(doc.problems))
    form = value.get("version")
    if not isinstance(form, int) or isinstance(form, bool) or form not in _READ_VERSIONS:
        doc.problem(("version",), f"must be {FORMAT_VERSION} (or 1, an older lock)")
    for key in sorted(set(value) - {"version", "items"}):
        doc.problem((key,), "unknown key")
    raw_items = value.get("items", [])
    if not isinstance(raw_items, list):
        doc.problem(("items",), "must be a list")
        raw_items = []
    items: dict[Key, Item] = {}
    for index, raw in enumerate(raw_items):
        item = _item(raw, ("items", index), doc)
        if item is None:
            continue
        if item.key in items:
            doc.problem(
                ("items", index),
                f"{item.kind} {item.name!r} of backend {item.backend!r} is listed twice",
            )
            continue
        items[item.key] = item
    if doc.problems:
        raise ConfigError(list(doc.problems))
    assert isinstance(form, int)  # a problem above otherwise
    version = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return Lock(items, version, str(path), form)


def _item(raw: Any, where: tuple[str | int, ...], doc: Any) -> Item | None:
    if not isinstance(raw, dict):
        doc.problem(where, "each item is a mapping (kind, backend, name, sha256, definition)")
        return None
    problems = len(doc.problems)
    for key in sorted(set(raw) - {"kind", "backend", "name", "sha256", "definition"}):
        doc.problem((*where, key), "unknown key")
    kind = raw.get("kind")
    if kind not in KINDS:
        doc.problem((*where, "kind"), f"must be one of {', '.join(KINDS)}")
    for key in ("backend", "name"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            doc.problem((*where, key), "must be a non-empty string")
    sha = raw.get("sha256")
    if not isinstance(sha, str) or not _SHA256.fullmatch(sha):
        doc.problem((*where, "sha256"), "must be 64 lowercase hex digits")
    definition = raw.get("definition")
    if not isinstance(definition, dict):
        doc.problem((*where, "definition"), "must be a mapping")
    if len(doc.problems) > problems:
        return None
    assert isinstance(definition, dict) and isinstance(sha, str)
    own = definition.get("uriTemplate" if kind == "template" else "name")
    if own != raw["name"]:
        member = "uriTemplate" if kind == "template" else "name"
        doc.problem((*where, "definition"), f"definition.{member} is not the item's name")
        return None
    try:
        actual = digest(definition)
    except (TypeError, ValueError):
        doc.problem((*where, "definition"), "is not plain JSON")
        return None
    if actual != sha:
        doc.problem(
            (*where, "sha256"),
            "does not match the definition (edited by hand? "
            "review with `catalog diff`, then `catalog approve`)",
        )
        return None
    kind_: Kind = kind  # type: ignore[assignment]  # checked against KINDS above
    return Item(kind_, raw["backend"], raw["name"], definition, sha)


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # never anchors: the loader refuses them, and a reviewer wants the text


def dump_lock(items: Iterable[Item]) -> str:
    """The lock file's text for ``items``: sorted, stable, every non-ASCII character escaped."""
    ordered = sorted(items, key=lambda item: item.key)
    document = {
        "version": FORMAT_VERSION,
        "items": [
            {
                "kind": item.kind,
                "backend": item.backend,
                "name": item.name,
                "sha256": item.sha256,
                "definition": _sorted(item.definition),
            }
            for item in ordered
        ],
    }
    body = yaml.dump(
        document,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=False,
        default_flow_style=False,
        width=100,
    )
    return _HEADER + body


def write_lock(path: Path, items: Iterable[Item]) -> None:
    """Write the lock atomically: a temporary file in the same directory, then a rename, so a
    gateway watching the file never reads half of it. The temporary file is read back with
    :func:`load_lock` first: a lock the gateway would refuse (e.g. a schema nested deeper than
    the YAML reader takes) raises :class:`ConfigError` and is never written."""
    text = dump_lock(items)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    temporary = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        load_lock(temporary)
        temporary.chmod(path.stat().st_mode & 0o777 if path.exists() else 0o644)
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value
