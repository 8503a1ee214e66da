"""A tool as the gateway exposes it: a backend definition with the policy's ``override:`` applied.

One pure function pair, used wherever the exposed definition matters: the merge of the catalogs
(:func:`gateway.backend.federation.merge_catalogs`, so ``tools/list``, ``tools/call`` routing and
everything keyed by name see the exposed tool) and the pinned catalog lock, which hashes the
exposed definition so that an override change is a reviewed change too.

What an override does (``docs/policy.md#overrides``):

* ``title`` / ``description`` replace the backend's (the same hygiene as the backend's text:
  hidden characters removed, capped at ``max_description_chars``);
* ``annotations``: single members set (``readOnlyHint: false``), the backend's others kept;
* ``rename``: the exposed ``name`` (the backend still receives its own, ``upstream_name``);
* ``arguments.fixed``: each property removed from ``inputSchema.properties`` and ``required``,
  its value checked against the property's own schema (with the root's ``$defs``), injected
  toward the backend by the call path (``ToolDef.fixed_arguments``);
* ``arguments.hidden``: optional properties removed from ``inputSchema.properties``.

``outputSchema`` and structured results are not touched. An override that does not fit the
tool (a property the schema lacks, a hidden property that is required, a fixed value the
property's schema refuses) is only knowable once the backend listed the tool, so it is
:class:`OverrideMisfit`: the federation hides that tool (fail closed: serving it without the
pin the operator asked for could send the caller's value where the operator meant to fix one)
and logs why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gateway.backend.catalog.hygiene import clean_text
from gateway.backend.catalog.tool_catalog import DEFAULT_MAX_DESCRIPTION_CHARS, compile_validator
from gateway.backend.upstream.tool_headers import header_params
from gateway.jsonkit.write import plain_copy
from gateway.seams import NO_CLAIMS, ToolDef, ToolOverride

__all__ = ["OverrideMisfit", "exposed_definition", "exposed_tool"]

_DEFS: Final = ("$schema", "$defs", "definitions")
"""Root members a property's schema may refer to (``$ref: #/$defs/...``) or depend on."""


class OverrideMisfit(ValueError):
    """The override cannot apply to this tool's definition; the message is a fixed reason
    naming the argument (names come from the policy, never from a request)."""


def exposed_definition(
    definition: Mapping[str, Any],
    override: ToolOverride,
    *,
    max_description_chars: int = DEFAULT_MAX_DESCRIPTION_CHARS,
) -> dict[str, Any]:
    """A new Tool object: ``definition`` (plain JSON, not modified) with ``override`` applied.

    Raises :class:`OverrideMisfit` when the override does not fit (module docstring).
    """
    exposed: dict[str, Any] = plain_copy(definition)  # private deep copy
    if override.rename is not None:
        exposed["name"] = override.rename
    for key, text in (("title", override.title), ("description", override.description)):
        if text is not None:
            exposed[key] = clean_text(text, max_description_chars).text
    if override.annotations:
        current = exposed.get("annotations")
        annotations = dict(current) if isinstance(current, Mapping) else {}
        for hint, value in override.annotations.items():
            annotations[hint] = (
                clean_text(value, max_description_chars).text if isinstance(value, str) else value
            )
        exposed["annotations"] = annotations
    if override.fixed or override.hidden:
        exposed["inputSchema"] = _closed_schema(exposed["inputSchema"], override)
    return exposed


def _closed_schema(schema: dict[str, Any], override: ToolOverride) -> dict[str, Any]:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    raw_required = schema.get("required")
    required = raw_required if isinstance(raw_required, list) else []
    for name, value in override.fixed.items():
        if name not in properties:
            raise OverrideMisfit(f"fixed argument {name!r} is not a property of the inputSchema")
        _check_value(schema, name, properties[name], value)
    for name in override.hidden:
        if name not in properties:
            raise OverrideMisfit(f"hidden argument {name!r} is not a property of the inputSchema")
        if name in required:
            raise OverrideMisfit(f"hidden argument {name!r} is required: fix it instead")
    closed = override.closed
    out = dict(schema)
    out["properties"] = {k: v for k, v in properties.items() if k not in closed}
    if "required" in schema:
        out["required"] = [name for name in required if name not in closed]
        if not out["required"]:
            del out["required"]
    return out


def _check_value(root: Mapping[str, Any], name: str, prop: Any, value: Any) -> None:
    if isinstance(prop, bool):
        if prop:
            return
        raise OverrideMisfit(f"fixed argument {name!r}: the property's schema is false")
    if not isinstance(prop, Mapping):
        raise OverrideMisfit(f"fixed argument {name!r}: the property's schema is not an object")
    subschema = {**{k: root[k] for k in _DEFS if k in root}, **prop}
    try:
        valid = compile_validator(subschema).is_valid(value)
    except ValueError:
        valid = False
    if not valid:
        raise OverrideMisfit(f"fixed argument {name!r}: the value does not match its schema")


def exposed_tool(
    tool: ToolDef,
    override: ToolOverride | None,
    *,
    max_description_chars: int = DEFAULT_MAX_DESCRIPTION_CHARS,
) -> ToolDef:
    """``tool`` as exposed under ``override`` (itself when there is none).

    The result keeps ``upstream_name`` and ``backend`` (where and under which name the call
    goes), carries ``fixed_arguments`` / ``closed_arguments`` for the call path, the
    ``x-mcp-header`` parameters of the exposed schema (those of a fixed or hidden property are
    gone: a caller sends no such header), and ``origin``, the backend's own definition.
    Raises :class:`OverrideMisfit` when the override does not fit.
    """
    if override is None:
        return tool
    origin = tool.origin if tool.origin is not None else tool
    definition = exposed_definition(
        origin.definition, override, max_description_chars=max_description_chars
    )
    params = origin.header_params
    if override.fixed or override.hidden:
        params = header_params(definition["inputSchema"])  # a subset: it already passed
    return ToolDef(
        name=definition["name"],
        definition=definition,
        header_params=params,
        upstream_name=origin.upstream_name or origin.name,
        backend=origin.backend,
        fixed_arguments=_frozen(override.fixed) if override.fixed else NO_CLAIMS,
        closed_arguments=override.closed,
        origin=origin,
    )


def _frozen(fixed: Mapping[str, Any]) -> Mapping[str, Any]:
    """A private plain copy (the call path copies it again into each request's arguments)."""
    copied: dict[str, Any] = plain_copy(fixed)
    return copied
