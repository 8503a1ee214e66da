"""MCP 2026-07-28 server/tools.mdx §Tool: the validated, immutable tool catalog of one upstream.

:func:`build_catalog` turns the raw ``tools`` arrays of every ``tools/list`` page into a
:class:`ToolCatalog`. Each tool is checked on its own; a bad tool is dropped with a logged reason
and never poisons the rest:

1. the entry is an object whose ``name`` is 1-64 characters of ``[A-Za-z0-9_.-]`` (digest §6.17:
   the spec's SHOULD is 128, the conformance suite checks 64; ``/`` is refused because it is not
   in the spec's character set), unique within the upstream, and still valid after the prefix;
2. ``inputSchema`` is an object schema with ``"type": "object"``; ``outputSchema``, when present,
   is an object;
3. the serialized definition is at most :data:`MAX_TOOL_BYTES`;
4. the ``x-mcp-header`` annotations follow the rules of tools.mdx
   (:mod:`gateway.backend.upstream.tool_headers`);
5. ``inputSchema`` compiles with jsonschema-rs with network ``$ref`` retrieval disabled
   (basic/index.mdx: implementations MUST NOT auto-dereference network ``$ref``);
6. at most :data:`MAX_TOOLS` tools; later ones are dropped.

Then the description hygiene of :mod:`.hygiene`: hidden (invisible or bidirectional control)
characters are removed from the title, description and ``annotations.title``, and each is capped
at ``max_description_chars``; :attr:`CatalogBuild.sanitised` says which tools changed how. A
*name* with such characters is never rewritten (the name is an identifier that policy rules,
limits and the audit trail match on; a silently rewritten one could alias another tool): rule 1
already refuses it, and the build reports it as ``name_refused``.

Why jsonschema-rs: it compiles a 2020-12 schema once into native code (10-50x faster per call
than the pure-Python ``jsonschema``), needs no generated Python (unlike ``fastjsonschema``, which
would ``exec`` code derived from backend-supplied schemas), uses a linear-time regex engine when
asked, and can refuse remote references. Validators are compiled once per catalog version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import jsonschema_rs

from gateway.backend.catalog.hygiene import clean_item, has_hidden
from gateway.backend.upstream.tool_headers import header_params
from gateway.jsonkit.read import JsonError
from gateway.jsonkit.write import canonical, plain_copy
from gateway.seams import TOOL_NAME, ToolDef

__all__ = [
    "DEFAULT_MAX_DESCRIPTION_CHARS",
    "EMPTY_CATALOG",
    "MAX_TOOLS",
    "MAX_TOOL_BYTES",
    "CatalogBuild",
    "SortedTools",
    "ToolCatalog",
    "build_catalog",
    "compile_validator",
    "valid_tool_name",
]

MAX_TOOLS: Final = 1024
"""Tools kept per upstream; the rest are dropped (and logged)."""
MAX_TOOL_BYTES: Final = 65_536
"""Largest serialized tool definition (UTF-8 JSON bytes) the gateway republishes."""
DEFAULT_MAX_DESCRIPTION_CHARS: Final = 2048
"""``limits.max_description_chars``: longest title or description, in characters."""


def valid_tool_name(name: object) -> bool:
    return isinstance(name, str) and bool(TOOL_NAME.fullmatch(name))


def _refuse_retrieval(uri: str) -> Any:
    # basic/index.mdx §$ref: never dereference network references automatically (SSRF).
    raise ValueError("remote $ref retrieval is disabled")


def compile_validator(schema: Mapping[str, Any]) -> jsonschema_rs.Validator:
    """Compile ``schema`` (2020-12 unless it names another draft) with retrieval disabled.

    Raises ``ValueError`` with a fixed reason when the schema does not compile.
    """
    try:
        return jsonschema_rs.validator_for(
            dict(schema),
            retriever=_refuse_retrieval,
            # Rust `regex`: linear time, so a hostile `pattern` cannot backtrack forever.
            pattern_options=jsonschema_rs.RegexOptions(),
            validate_formats=False,
        )
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        raise ValueError("inputSchema does not compile") from exc


class SortedTools:
    """Tools sorted by name and found by name, under a version: what every catalog snapshot
    (one upstream's, the federation's) shares of :class:`gateway.seams.Catalog`."""

    __slots__ = ("_names", "_order", "_tools", "version")

    def __init__(self, tools: Iterable[ToolDef], version: str) -> None:
        self._order: tuple[ToolDef, ...] = tuple(sorted(tools, key=lambda t: t.name))
        self._tools: dict[str, ToolDef] = {t.name: t for t in self._order}
        self._names: frozenset[str] = frozenset(self._tools)
        self.version: str = version

    def get(self, name: str) -> ToolDef | None:
        return self._tools.get(name)

    @property
    def names(self) -> frozenset[str]:
        return self._names

    def __iter__(self) -> Iterator[ToolDef]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __repr__(self) -> str:
        return f"{type(self).__name__}(version={self.version!r}, tools={len(self._order)})"


class ToolCatalog(SortedTools):
    """An immutable snapshot of one upstream's tools, sorted by advertised name.

    Implements :class:`gateway.seams.Catalog`; also keeps one compiled argument validator per
    tool. ``version`` is a content hash, so two fetches of the same tools share a version.
    """

    __slots__ = ("_validators",)

    ttl_ms: int | None = None
    """No freshness hint of its own (the federated catalog computes one, :mod:`.federation`)."""

    def __init__(self, entries: Sequence[tuple[ToolDef, jsonschema_rs.Validator]]) -> None:
        ordered = sorted(entries, key=lambda e: e[0].name)
        digest = hashlib.sha256()
        for tool, _ in ordered:
            digest.update(canonical(tool.definition))
            digest.update(b"\n")
        super().__init__([tool for tool, _ in ordered], digest.hexdigest()[:16])
        self._validators: dict[str, jsonschema_rs.Validator] = {t.name: v for t, v in ordered}

    def without(self, names: Collection[str]) -> ToolCatalog:
        """This snapshot less ``names`` (their validators are not compiled again)."""
        return ToolCatalog(
            [(self._tools[n], v) for n, v in self._validators.items() if n not in names]
        )

    def validator(self, name: str) -> jsonschema_rs.Validator | None:
        return self._validators.get(name)


EMPTY_CATALOG: Final = ToolCatalog(())


@dataclass(frozen=True, slots=True)
class CatalogBuild:
    catalog: ToolCatalog
    dropped: tuple[tuple[str, str], ...]
    """(tool name or ``#index``, fixed reason) for every dropped tool."""
    sanitised: tuple[tuple[str, str], ...] = ()
    """(tool name, change) for every tool the hygiene changed or refused, the change one of
    :data:`gateway.observability.metrics.CATALOG_SANITISED_KINDS`; a refused name is shown with
    its hidden characters escaped."""


def build_catalog(
    tools: Sequence[Any],
    *,
    prefix: str = "",
    backend: str = "",
    max_description_chars: int = DEFAULT_MAX_DESCRIPTION_CHARS,
) -> CatalogBuild:
    """Validate every raw tool object and build the catalog; see the module docstring.

    ``backend`` (the backend's configured name) is stamped on every :class:`ToolDef`.
    """
    dropped: list[tuple[str, str]] = []
    sanitised: list[tuple[str, str]] = []
    counts: dict[str, int] = {}
    for raw in tools:
        if isinstance(raw, Mapping) and isinstance(raw.get("name"), str):
            counts[raw["name"]] = counts.get(raw["name"], 0) + 1
    entries: list[tuple[ToolDef, jsonschema_rs.Validator]] = []
    for index, raw in enumerate(tools):
        label = _label(raw, index)
        try:
            if counts.get(label, 0) > 1:
                # SHOULD be unique per server; which copy is meant is unknowable, so drop all.
                raise ValueError("duplicate tool name")
            if len(entries) >= MAX_TOOLS:
                raise ValueError("catalog already holds the maximum number of tools")
            name = raw.get("name") if isinstance(raw, Mapping) else None
            if isinstance(name, str) and has_hidden(name):
                label = escaped(name)
                sanitised.append((label, "name_refused"))
                raise ValueError("tool name contains invisible or bidirectional characters")
            tool, validator, changes = _validate_tool(raw, prefix, backend, max_description_chars)
            entries.append((tool, validator))
            sanitised.extend((tool.name, kind) for kind in sorted(changes))
        except ValueError as exc:
            dropped.append((label, str(exc)))
    return CatalogBuild(ToolCatalog(entries), tuple(dropped), tuple(sanitised))


def escaped(name: str) -> str:
    """A name safe to log: hidden and other non-ASCII characters as ``\\uXXXX``, 128 at most."""
    return name.encode("ascii", "backslashreplace").decode("ascii")[:128]


def _label(raw: Any, index: int) -> str:
    if isinstance(raw, Mapping) and valid_tool_name(raw.get("name")):
        return str(raw["name"])
    return f"#{index}"


def _validate_tool(
    raw: Any, prefix: str, backend: str, max_chars: int
) -> tuple[ToolDef, jsonschema_rs.Validator, frozenset[str]]:
    if not isinstance(raw, Mapping):
        raise ValueError("tool is not an object")
    name = raw.get("name")
    if not isinstance(name, str) or not valid_tool_name(name):
        raise ValueError("tool name must be 1-64 characters of [A-Za-z0-9_.-]")
    advertised = prefix + name
    if not valid_tool_name(advertised):
        raise ValueError("prefixed tool name must be 1-64 characters of [A-Za-z0-9_.-]")
    schema = raw.get("inputSchema")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise ValueError('inputSchema must be an object schema with "type": "object"')
    output = raw.get("outputSchema")
    if output is not None and not isinstance(output, Mapping):
        raise ValueError("outputSchema must be an object")
    try:
        # A private deep copy: the catalog never shares mutable objects with the parser.
        definition: dict[str, Any] = plain_copy(
            {**raw, "name": advertised}, sort_keys=True, max_bytes=MAX_TOOL_BYTES
        )
    except JsonError as exc:
        if exc.kind == "limit":
            raise ValueError("tool definition exceeds the size limit") from exc
        raise ValueError("tool definition is not plain JSON") from exc
    changes = clean_item(definition, max_chars)
    params = header_params(definition["inputSchema"])
    validator = compile_validator(definition["inputSchema"])
    tool = ToolDef(
        name=advertised,
        definition=definition,
        header_params=params,
        upstream_name=name,
        backend=backend,
    )
    return tool, validator, changes
