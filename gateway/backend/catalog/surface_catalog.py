"""One upstream's prompts, resources and resource templates, validated (2026-07-28
server/prompts.mdx §Listing Prompts, server/resources.mdx §Listing Resources and §Resource
Templates; the same objects in the 2025 revisions).

:func:`build_surface` checks each listed item on its own and rebuilds it from plain JSON; a bad
item is dropped with a fixed reason and never poisons the rest:

- a prompt: ``name`` 1-64 characters of ``[A-Za-z0-9_.-]`` (as tools: it is prefixed and
  becomes a slash command), still valid after the prefix; ``arguments`` at most
  :data:`MAX_ARGUMENTS` objects with unique string names (``required`` a boolean);
- a resource: ``uri`` a URI (:func:`valid_uri`), ``name`` a string, ``mimeType`` a media type
  (:func:`gateway.backend.upstream.surface_results.valid_media_type`), ``size`` a non-negative
  integer;
- a template: ``uriTemplate`` a URI template with balanced expressions, ``name`` a string;
- every item at most :data:`MAX_ITEM_BYTES` of canonical JSON, at most :data:`MAX_ITEMS` per
  kind, duplicates (same name / URI / template) dropped altogether.

Only the members the schema defines are kept (``name``, ``title``, ``description``, ``icons``,
``annotations``, ``_meta``, and the kind's own), each of the right JSON type.

Then the description hygiene of :mod:`.hygiene` (as for tools): hidden characters removed from
titles and descriptions (a prompt's arguments' too, and a resource's or template's ``name``, a
display name there: the URI identifies it), each capped at ``max_description_chars``. A prompt
name with hidden characters is refused (``name_refused``), never rewritten.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from gateway.backend.catalog.hygiene import clean_item, has_hidden
from gateway.backend.catalog.tool_catalog import (
    DEFAULT_MAX_DESCRIPTION_CHARS,
    escaped,
    valid_tool_name,
)
from gateway.backend.upstream.surface_results import valid_media_type
from gateway.jsonkit.read import JsonError
from gateway.jsonkit.write import plain_copy
from gateway.seams import PromptDef, ResourceDef

__all__ = [
    "MAX_ARGUMENTS",
    "MAX_ITEMS",
    "MAX_ITEM_BYTES",
    "SurfacePart",
    "build_surface",
    "served_definition",
    "valid_uri",
]

MAX_ITEMS: Final = 1024
"""Prompts, resources and templates kept per upstream, each; later ones are dropped."""
MAX_ITEM_BYTES: Final = 65_536
MAX_ARGUMENTS: Final = 64
MAX_URI: Final = 2048
_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[\x21-\x7e]*")
_TEMPLATE: Final = re.compile(
    r"[A-Za-z][A-Za-z0-9+.\-]*:(?:[\x21-\x7a|~]|\{[+#./;?&]?[A-Za-z0-9_.%,*:]+\})*"
)
_COMMON: Final = (("title", str), ("description", str), ("icons", list), ("_meta", dict))


def valid_uri(value: Any) -> bool:
    """A URI the gateway passes on: a scheme, then printable ASCII only, at most 2048 chars."""
    return isinstance(value, str) and len(value) <= MAX_URI and bool(_URI.fullmatch(value))


@dataclass(frozen=True, slots=True)
class SurfacePart:
    """What one upstream lists, validated."""

    prompts: tuple[PromptDef, ...] = ()
    resources: tuple[ResourceDef, ...] = ()
    templates: tuple[ResourceDef, ...] = ()
    dropped: tuple[tuple[str, str, str], ...] = ()
    """(kind, item label, fixed reason) for every dropped item."""
    sanitised: tuple[tuple[str, str, str], ...] = ()
    """(kind, item label, change): the change is one of
    :data:`gateway.observability.metrics.CATALOG_SANITISED_KINDS`."""
    offers: frozenset[str] = frozenset()
    """What the upstream advertised (``prompts``, ``resources``, ``completions``) when fetched."""
    subscribe: bool = False


EMPTY_PART: Final = SurfacePart()


def build_surface(
    prompts: Sequence[Any],
    resources: Sequence[Any],
    templates: Sequence[Any],
    *,
    prefix: str,
    backend: str,
    max_description_chars: int = DEFAULT_MAX_DESCRIPTION_CHARS,
) -> SurfacePart:
    dropped: list[tuple[str, str, str]] = []
    sanitised: list[tuple[str, str, str]] = []

    def each(kind: str, items: Sequence[Any], key: str, build: Any) -> list[Any]:
        counts: dict[Any, int] = {}
        for raw in items:
            if isinstance(raw, Mapping) and isinstance(raw.get(key), str):
                counts[raw[key]] = counts.get(raw[key], 0) + 1
        kept: list[Any] = []
        for index, raw in enumerate(items):
            label = raw.get(key) if isinstance(raw, Mapping) else None
            label = label[:128] if isinstance(label, str) else f"#{index}"
            try:
                if counts.get(label, 0) > 1:
                    raise ValueError(f"duplicate {key}")
                if len(kept) >= MAX_ITEMS:
                    raise ValueError("the upstream lists more items than the gateway keeps")
                if kind == "prompt" and has_hidden(label):
                    label = escaped(label)
                    sanitised.append((kind, label, "name_refused"))
                    raise ValueError("prompt name contains invisible or bidirectional characters")
                item = build(raw)
                definition = dict(item.definition)  # private (``_plain``), the copy is shallow
                names = () if kind == "prompt" else ("name",)
                changes = clean_item(definition, max_description_chars, names=names)
                item = dataclasses.replace(item, definition=definition)
                sanitised.extend((kind, label, change) for change in sorted(changes))
                kept.append(item)
            except ValueError as exc:
                dropped.append((kind, label, str(exc)))
        return kept

    return SurfacePart(
        prompts=tuple(
            sorted(
                each("prompt", prompts, "name", lambda raw: _prompt(raw, prefix, backend)),
                key=lambda p: p.name,
            )
        ),
        resources=tuple(
            sorted(
                each("resource", resources, "uri", lambda raw: _resource(raw, backend)),
                key=lambda r: r.uri,
            )
        ),
        templates=tuple(
            sorted(
                each("template", templates, "uriTemplate", lambda raw: _template(raw, backend)),
                key=lambda t: t.uri,
            )
        ),
        dropped=tuple(dropped),
        sanitised=tuple(sanitised),
    )


def served_definition(kind: Literal["prompt", "template"], raw: Any) -> dict[str, Any]:
    """The definition :func:`build_surface` serves for one listed prompt or template, before
    the description hygiene, under the backend's own name: every member it keeps (the pinned
    catalog hashes exactly this, :mod:`.pinning`). Raises ``ValueError`` for an item that
    :func:`build_surface` refuses."""
    item = _prompt(raw, "", "") if kind == "prompt" else _template(raw, "")
    return dict(item.definition)


def _common(raw: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(raw.get("name"), str) or not raw["name"]:
        raise ValueError("name must be a non-empty string")
    out: dict[str, Any] = {"name": raw["name"]}
    for key, kind in _COMMON:
        if isinstance(raw.get(key), kind):
            out[key] = raw[key]
    return out


def _prompt(raw: Any, prefix: str, backend: str) -> PromptDef:
    if not isinstance(raw, Mapping):
        raise ValueError("prompt is not an object")
    name = raw.get("name")
    if not valid_tool_name(name):
        raise ValueError("prompt name must be 1-64 characters of [A-Za-z0-9_.-]")
    exposed = prefix + str(name)
    if not valid_tool_name(exposed):
        raise ValueError("prefixed prompt name must be 1-64 characters of [A-Za-z0-9_.-]")
    definition = _common(raw)
    definition["name"] = exposed
    arguments = raw.get("arguments", [])
    if not isinstance(arguments, list) or len(arguments) > MAX_ARGUMENTS:
        raise ValueError(f"arguments must be a list of at most {MAX_ARGUMENTS}")
    declared: list[tuple[str, bool]] = []
    rebuilt = []
    for argument in arguments:
        if not isinstance(argument, Mapping) or not isinstance(argument.get("name"), str):
            raise ValueError("each argument must be an object with a string name")
        arg_name = argument["name"]
        if not 0 < len(arg_name) <= 128 or arg_name in {n for n, _ in declared}:
            raise ValueError("argument names must be unique, 1-128 characters")
        required = argument.get("required", False)
        if not isinstance(required, bool):
            raise ValueError("argument required must be a boolean")
        entry: dict[str, Any] = {"name": arg_name}
        for key in ("title", "description"):
            if isinstance(argument.get(key), str):
                entry[key] = argument[key]
        if required:
            entry["required"] = True
        rebuilt.append(entry)
        declared.append((arg_name, required))
    if rebuilt:
        definition["arguments"] = rebuilt
    return PromptDef(
        name=exposed,
        definition=_plain(definition),
        upstream_name=str(name),
        backend=backend,
        arguments=tuple(declared),
    )


def _resource(raw: Any, backend: str) -> ResourceDef:
    if not isinstance(raw, Mapping):
        raise ValueError("resource is not an object")
    uri = raw.get("uri")
    if not valid_uri(uri):
        raise ValueError("uri must be a URI of printable ASCII, at most 2048 characters")
    definition = _common(raw)
    definition["uri"] = uri
    _media(raw, definition)
    size = raw.get("size")
    if size is not None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError("size must be a non-negative integer")
        definition["size"] = size
    if isinstance(raw.get("annotations"), dict):
        definition["annotations"] = raw["annotations"]
    return ResourceDef(
        uri=str(uri), definition=_plain(definition), upstream_uri=str(uri), backend=backend
    )


def _template(raw: Any, backend: str) -> ResourceDef:
    if not isinstance(raw, Mapping):
        raise ValueError("template is not an object")
    template = raw.get("uriTemplate")
    if (
        not isinstance(template, str)
        or len(template) > MAX_URI
        or not _TEMPLATE.fullmatch(template)
    ):
        raise ValueError("uriTemplate must be an RFC 6570 template of printable ASCII")
    definition = _common(raw)
    definition["uriTemplate"] = template
    _media(raw, definition)
    if isinstance(raw.get("annotations"), dict):
        definition["annotations"] = raw["annotations"]
    return ResourceDef(
        uri=template, definition=_plain(definition), upstream_uri=template, backend=backend
    )


def _media(raw: Mapping[str, Any], definition: dict[str, Any]) -> None:
    mime = raw.get("mimeType")
    if mime is not None:
        if not valid_media_type(mime):
            raise ValueError("mimeType is not a media type")
        definition["mimeType"] = mime


def _plain(definition: dict[str, Any]) -> dict[str, Any]:
    """A private canonical copy, bounded (nothing shared with the parser)."""
    try:
        copy: dict[str, Any] = plain_copy(definition, sort_keys=True, max_bytes=MAX_ITEM_BYTES)
    except JsonError as exc:
        if exc.kind == "limit":
            raise ValueError("definition exceeds the size limit") from exc
        raise ValueError("definition is not plain JSON") from exc
    return copy
