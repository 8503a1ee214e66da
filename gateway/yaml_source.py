"""YAML documents with source positions, validated by a JSON Schema (2020-12).

Used by the configuration loader and the policy loader so that every finding an operator sees
names ``file:line:column`` and the key path. Loading uses PyYAML's safe composer only (no Python
object tags); mapping keys must be unique strings.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema_rs
import yaml

__all__ = ["Located", "SchemaValidator", "format_path", "load_yaml"]

PathPart = str | int


@dataclass(slots=True)
class Located:
    """A plain Python value (dict/list/str/int/float/bool/None) plus the marks of every node."""

    file: str
    value: Any
    marks: dict[tuple[PathPart, ...], tuple[int, int]] = field(default_factory=dict)
    """Key path -> (line, column), both 1-based. For mappings the key's own position is used."""
    problems: list[str] = field(default_factory=list)

    def where(self, path: tuple[PathPart, ...]) -> str:
        """``file:line:col`` of the deepest known node on ``path``."""
        for cut in range(len(path), -1, -1):
            mark = self.marks.get(path[:cut])
            if mark is not None:
                return f"{self.file}:{mark[0]}:{mark[1]}"
        return f"{self.file}:1:1"

    def problem(self, path: tuple[PathPart, ...], message: str) -> None:
        self.problems.append(f"{self.where(path)}: {format_path(path)}: {message}")


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
        node = yaml.compose(text, Loader=yaml.SafeLoader)
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


_CONSTRUCTOR = yaml.SafeLoader("")


def _convert(node: yaml.Node, path: tuple[PathPart, ...], doc: Located) -> Any:
    doc.marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _CONSTRUCTOR.construct_object(key_node)
            if not isinstance(key, str):
                key = str(key)
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
        return _CONSTRUCTOR.construct_object(node)
    except yaml.YAMLError:
        doc.problem(path, "unsupported YAML value")
        return None


class SchemaValidator:
    """A compiled JSON Schema that reports every violation with its source position."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self._validator = jsonschema_rs.validator_for(schema)

    @classmethod
    @cache
    def packaged(cls, name: str) -> SchemaValidator:
        text = resources.files("gateway.schema").joinpath(name).read_text(encoding="utf-8")
        return cls(json.loads(text))

    def check(self, doc: Located, base: tuple[PathPart, ...] = ()) -> None:
        for path, message in self._errors(doc.value):
            doc.problem((*base, *path), message)

    def _errors(self, value: Any) -> Iterator[tuple[tuple[PathPart, ...], str]]:
        seen: set[tuple[tuple[PathPart, ...], str]] = set()
        for err in self._validator.iter_errors(value):
            path = tuple(err.instance_path)
            unexpected = getattr(err.kind, "unexpected", None)
            if isinstance(unexpected, list):
                # Point at the unknown key itself, not at its parent mapping.
                found = [((*path, str(key)), "unknown key") for key in unexpected]
            else:
                found = [(path, _friendly(err.message))]
            for item in found:
                if item not in seen:
                    seen.add(item)
                    yield item


def _friendly(message: str) -> str:
    if "is not valid under any of the given schemas" in message:
        return "does not match any allowed form (see docs/configuration.md)"
    return message
