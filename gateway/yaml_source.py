"""YAML documents with source positions, validated by a JSON Schema (2020-12).

Used by the configuration loader and the policy loader so that every finding an operator sees
names ``file:line:column`` and the key path. Loading uses PyYAML's safe composer only (no Python
object tags); mapping keys must be unique strings, and values the plain JSON types.

Anchors (``&name``), aliases (``*name``) and merge keys (``<<:``) are refused, each at its own
position: an alias shares a node, so a few hundred bytes of nested aliases expand to billions of
values (the "billion laughs"), and a recursive alias never ends. Nesting is bounded too
(:data:`MAX_DEPTH`), because PyYAML composes recursively. A finding never escapes as a
traceback: :func:`load_yaml` returns it in ``problems`` like any other.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Final

import jsonschema_rs
import yaml

from gateway.jsonkit.read import UNBOUNDED, loads, peer_limits

__all__ = ["MAX_DEPTH", "Located", "SchemaValidator", "format_path", "load_yaml"]

PathPart = str | int

MAX_DEPTH: Final = 64
"""Deepest nesting of mappings and lists in a file (shipped configs and policies: 6 at most)."""

_MERGE_TAG: Final = "tag:yaml.org,2002:merge"
_JSON_SCALARS: Final = (str, int, float, bool, type(None))


@dataclass(slots=True)
class Located:
    """A plain Python value (dict/list/str/int/float/bool/None) plus the marks of every node."""

    file: str
    value: Any
    marks: dict[tuple[PathPart, ...], tuple[int, int]] = field(default_factory=dict)
    """Key path -> (line, column), both 1-based. For mappings the key's own position is used."""
    problems: list[str] = field(default_factory=list)
    flawed: list[tuple[PathPart, ...]] = field(default_factory=list)
    """The key path of each :meth:`problem` (what a checker may leave out to go on)."""

    def where(self, path: tuple[PathPart, ...]) -> str:
        """``file:line:col`` of the deepest known node on ``path``."""
        for cut in range(len(path), -1, -1):
            mark = self.marks.get(path[:cut])
            if mark is not None:
                return f"{self.file}:{mark[0]}:{mark[1]}"
        return f"{self.file}:1:1"

    def problem(self, path: tuple[PathPart, ...], message: str) -> None:
        self.problems.append(f"{self.where(path)}: {format_path(path)}: {message}")
        self.flawed.append(path)


def format_path(path: tuple[PathPart, ...]) -> str:
    if not path:
        return "(top level)"
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load_yaml(path: Path) -> Located:
    """Parse one YAML file; syntax errors and duplicate keys become ``problems``."""
    name = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Located(
            name, None, problems=[f"{name}:1:1: cannot read file: {exc.__class__.__name__}"]
        )
    doc = Located(name, None)
    try:
        node = yaml.compose(text, Loader=_StrictLoader)
    except _Refused as exc:
        doc.problems.append(f"{name}:{exc.line}:{exc.column}: {exc.message}")
        return doc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        doc.problems.append(f"{name}:{line}:{col}: YAML syntax error: {exc.problem}")
        return doc
    except yaml.YAMLError as exc:
        doc.problems.append(f"{name}:1:1: YAML error: {exc}")
        return doc
    if node is None:
        doc.value = None
        return doc
    doc.value = _convert(node, (), doc)
    return doc


class _Refused(Exception):
    """A construct the gateway does not read, at its position (not a syntax error)."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.line: int = mark.line + 1 if mark else 1
        self.column: int = mark.column + 1 if mark else 1


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader whose composer refuses anchors, aliases and deep nesting.

    The check runs on each node's first event, before PyYAML records an anchor or resolves an
    alias, so nothing is ever shared or expanded.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(
                f"YAML aliases (*{event.anchor}) are not supported: write the value out",
                event.start_mark,
            )
        if getattr(event, "anchor", None) is not None:
            raise _Refused(
                f"YAML anchors (&{event.anchor}) are not supported: write the value out",
                event.start_mark,
            )
        if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            if self._depth >= MAX_DEPTH:
                raise _Refused(
                    f"nested deeper than {MAX_DEPTH} levels of mappings and lists",
                    event.start_mark,
                )
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1
        return super().compose_node(parent, index)


_CONSTRUCTOR = yaml.SafeLoader("")


def _convert(node: yaml.Node, path: tuple[PathPart, ...], doc: Located) -> Any:
    doc.marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                doc.marks[(*path, "<<")] = (
                    key_node.start_mark.line + 1,
                    key_node.start_mark.column + 1,
                )
                doc.problem(
                    (*path, "<<"), "YAML merge keys (<<) are not supported: write the keys out"
                )
                continue
            try:
                key = _CONSTRUCTOR.construct_object(key_node)
            except yaml.YAMLError:  # a tag the safe loader does not construct
                key = None
            if not isinstance(key, str):
                key = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
                doc.marks[(*path, key)] = (
                    key_node.start_mark.line + 1,
                    key_node.start_mark.column + 1,
                )
                doc.problem((*path, key), "keys must be strings")
                continue
            child = (*path, key)
            doc.marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in out:
                doc.problem(child, "duplicate key")
                continue
            out[key] = _convert(value_node, child, doc)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), doc) for i, item in enumerate(node.value)]
    try:
        value = _CONSTRUCTOR.construct_object(node)
    except yaml.YAMLError:
        doc.problem(path, "unsupported YAML value")
        return None
    if isinstance(value, _JSON_SCALARS):
        return value
    if isinstance(value, datetime.date):  # datetime.datetime is a date too
        doc.problem(path, "is read as a YAML timestamp: quote it to make it a string")
    else:
        doc.problem(path, "unsupported YAML value")
    return None


class SchemaValidator:
    """A compiled JSON Schema that reports every violation with its source position.

    Messages are the gateway's own, never the validator library's text or a raw regular
    expression (:func:`explain`): a subschema may carry ``"x-message"`` (what to write instead,
    used for its ``pattern``, ``oneOf`` and ``type`` errors) and ``"x-sensitive": true`` (never
    show the offending value: secret references).
    """

    def __init__(self, schema: dict[str, Any], docs: str = "the documentation") -> None:
        self.schema = schema
        self.docs = docs
        self._validator = jsonschema_rs.validator_for(schema)

    @classmethod
    @cache
    def packaged(cls, name: str) -> SchemaValidator:
        data = resources.files("gateway.schema").joinpath(name).read_bytes()
        return cls(loads(data, peer_limits(UNBOUNDED)), _DOCS.get(name, "the documentation"))

    def check(self, doc: Located, base: tuple[PathPart, ...] = ()) -> None:
        for path, message in self._errors(doc.value):
            doc.problem((*base, *path), message)

    def _errors(self, value: Any) -> Iterator[tuple[tuple[PathPart, ...], str]]:
        seen: set[tuple[tuple[PathPart, ...], str]] = set()
        for err in self._validator.iter_errors(value):
            for item in self._explained(err):
                if item not in seen:
                    seen.add(item)
                    yield item

    def _explained(self, err: Any) -> list[tuple[tuple[PathPart, ...], str]]:
        path = tuple(err.instance_path)
        kind, info = err.kind.name, err.kind.as_dict()
        if kind in ("additionalProperties", "unevaluatedProperties"):
            # Point at the unknown key itself, not at its parent mapping.
            return [((*path, str(key)), "unknown key") for key in info.get("unexpected", [])]
        if kind == "propertyNames" and info.get("error") is not None:
            # Point at the offending key, with the message of the key's own schema.
            inner = info["error"]
            node = self._node(err.schema_path)
            return [((*path, str(inner.instance)), explain(inner, node, False, self.docs))]
        if kind in ("oneOf", "anyOf"):
            branch = _discriminated(info.get("context", []))
            if branch is not None:
                # One branch's `const` matched (e.g. credential type: bearer): its errors are
                # the ones the operator needs, not "matches no form".
                return [item for sub in branch for item in self._explained(sub)]
        return [(path, explain(err, self._node(err.schema_path), self._sensitive(err), self.docs))]

    def _node(self, schema_path: Any) -> dict[str, Any]:
        """The subschema holding the failing keyword (``schema_path`` minus the keyword)."""
        node: Any = self.schema
        for part in list(schema_path)[:-1]:
            node = node[part] if isinstance(node, dict | list) else None
            if node is None:
                return {}
        return node if isinstance(node, dict) else {}

    def _sensitive(self, err: Any) -> bool:
        node: Any = self.schema
        for part in list(err.schema_path):
            if isinstance(node, dict) and node.get("x-sensitive") is True:
                return True
            try:
                node = node[part]
            except (KeyError, IndexError, TypeError):
                return False
        return False


_DOCS: Final = {
    "gateway.schema.json": "docs/configuration.md",
    "policy.schema.json": "docs/policy.md",
}
_TYPE_NAMES: Final = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}
_MAX_SHOWN: Final = 60


def explain(err: Any, node: dict[str, Any], sensitive: bool, docs: str) -> str:
    """The operator's message for one validation error (see :class:`SchemaValidator`)."""
    kind, info = err.kind.name, err.kind.as_dict()
    if kind == "oneOf" and sum(1 for errors in info.get("context", []) if not errors) > 1:
        kind = "oneOfMultipleValid"  # jsonschema-rs reports both cases as "oneOf"
    custom = node.get("x-message")
    if isinstance(custom, str) and kind in ("pattern", "oneOf", "anyOf", "type"):
        text = custom
    elif kind == "required":
        return f'required key "{info.get("property")}" is missing'
    else:
        text = _predicate(kind, info, docs)
    shown = None if sensitive else _shown(err.instance)
    return f"{shown} {text}" if shown is not None else text


def _predicate(kind: str, info: dict[str, Any], docs: str) -> str:
    limit = info.get("limit")
    if kind == "type":
        names = [_TYPE_NAMES.get(t, t) for t in info.get("types", [])]
        return "is not " + " or ".join(names)
    if kind == "enum":
        options = [o for o in info.get("options", []) if not isinstance(o, bool)] or info.get(
            "options", []
        )
        return "is not one of: " + ", ".join(_literal(o) for o in options)
    if kind == "const":
        return f"is not {_literal(info.get('expected_value'))} (the only allowed value)"
    messages = {
        "minimum": f"is less than the minimum of {limit}",
        "maximum": f"is greater than the maximum of {limit}",
        "exclusiveMinimum": f"must be greater than {limit}",
        "exclusiveMaximum": f"must be less than {limit}",
        "minLength": "is empty" if limit == 1 else f"is shorter than {limit} characters",
        "maxLength": f"is longer than {limit} characters",
        "minItems": "is an empty list" if limit == 1 else f"has fewer than {limit} entries",
        "maxItems": f"has more than {limit} entries",
        "minProperties": f"has fewer than {limit} keys",
        "maxProperties": f"has more than {limit} keys",
        "uniqueItems": "lists the same value more than once",
        "pattern": f"does not have the expected form (see {docs})",
        "oneOf": f"does not match any allowed form (see {docs})",
        "anyOf": f"does not match any allowed form (see {docs})",
        "oneOfMultipleValid": f"matches more than one allowed form (see {docs})",
        "multipleOf": f"is not a multiple of {info.get('multiple_of')}",
    }
    return messages.get(kind, f"is not valid here (see {docs})")


def _discriminated(branches: list[list[Any]]) -> list[Any] | None:
    """The one ``oneOf`` branch whose ``const`` keywords all matched, if exactly one."""
    matching = [
        errors for errors in branches if errors and not any(e.kind.name == "const" for e in errors)
    ]
    has_const = any(any(e.kind.name == "const" for e in errors) for errors in branches)
    return matching[0] if has_const and len(matching) == 1 else None


def _shown(value: Any) -> str | None:
    """A short rendering of the offending value, or None for mappings and lists."""
    if isinstance(value, str):
        if len(value) > _MAX_SHOWN:
            value = value[: _MAX_SHOWN - 1] + "…"
        return json.dumps(value, ensure_ascii=False)
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def _literal(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
