"""Write ``gateway/schema/gateway.schema.json`` (and its ``docs/schema`` copy) from the config
dataclasses' declarations (:mod:`gateway.config.declare`)::

    .venv/bin/python scripts/config_schema.py          # write both files
    .venv/bin/python scripts/config_schema.py --check  # exit 1 when they are out of date

``tests/unit/test_config_declarations.py`` fails when the committed files differ from what this
writes. The ``description`` of a key is its row's Meaning in docs/configuration.md (the prose
lives there, the facts in the declaration); its ``default`` is the declared one, when JSON can
say it (editors offer both).
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple, get_args, get_origin

from gateway.config import Config, Rate
from gateway.config.declare import UNSET, Key, key_fields, merged, unwrap

ROOT: Final = Path(__file__).resolve().parents[1]
TARGETS: Final = (
    ROOT / "gateway" / "schema" / "gateway.schema.json",
    ROOT / "docs" / "schema" / "gateway.schema.json",
)
DOCS: Final = ROOT / "docs" / "configuration.md"
HEADER: Final = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://github.com/mcp-resource-gateway/schema/gateway.schema.json",
    "title": "mcp-resource-gateway configuration (gateway.yaml)",
}
_KEYWORDS: Final = (
    ("minimum", "minimum"),
    ("maximum", "maximum"),
    ("exclusive_minimum", "exclusiveMinimum"),
    ("min_length", "minLength"),
    ("max_length", "maxLength"),
    ("pattern", "pattern"),
    ("min_items", "minItems"),
    ("max_items", "maxItems"),
    ("min_properties", "minProperties"),
    ("max_properties", "maxProperties"),
)


class Deriver:
    """The JSON Schema of the declared dataclasses; shared shapes collected in ``defs``."""

    def __init__(self, descriptions: Mapping[str, str] | None = None) -> None:
        self.defs: dict[str, Any] = {}
        self.descriptions = descriptions or {}

    def document(self) -> dict[str, Any]:
        body = self.dataclass(Config, Key(), ())
        defs = {name: self.defs[name] for name in sorted(self.defs)}
        return {**HEADER, **body, "$defs": defs}

    def field(self, tp: Any, key: Key, path: tuple[str, ...], *, nullable: bool = False) -> Any:
        """The schema of one value of type ``tp`` declared by ``key`` at key path ``path``."""
        tp, inner, optional = unwrap(tp)
        key = merged(key, inner)
        if key.ref is not None:
            # Described as at its first site; a description two sites word differently is left
            # out (listen.host and ops_listen.host share one shape).
            shape = self.shape(tp, key, path, nullable=nullable and optional)
            if key.extend:
                shape.pop("additionalProperties", None)
            known = self.defs.setdefault(key.ref, shape)
            assert _plain(known) == _plain(shape), f"two shapes named {key.ref}: {path}"
            _agree(known, shape)
            out: dict[str, Any] = {"$ref": f"#/$defs/{key.ref}"}
            if key.extend:
                out["properties"] = {
                    name: self.field(str, extra, (*path, name))
                    for name, extra in key.extend.items()
                }
                out["unevaluatedProperties"] = False
            return self.described(out, path)
        return self.described(self.shape(tp, key, path, nullable=nullable and optional), path)

    def described(self, shape: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
        text = self.descriptions.get(dotted(path))
        return {"description": text, **shape} if text else shape

    def shape(self, tp: Any, key: Key, path: tuple[str, ...], *, nullable: bool) -> dict[str, Any]:
        if key.schema is not None:
            copy: dict[str, Any] = json.loads(json.dumps(key.schema))  # a deep, plain copy
            return copy
        shape = self.derived(tp, key, path)
        if nullable and "type" in shape:
            shape["type"] = [shape["type"], "null"]
        if key.message is not None:
            shape = {"x-message": key.message, **shape}
        return shape

    def derived(self, tp: Any, key: Key, path: tuple[str, ...]) -> dict[str, Any]:
        origin, args = get_origin(tp), get_args(tp)
        if tp is bool:
            return {"type": "boolean"}
        if tp is int or tp is float:
            return {"type": "integer" if tp is int else "number", **_keywords(key)}
        if tp is str or tp is Path:
            return {"type": "string", **_keywords(key)}
        if origin is Literal:
            return {"enum": list(args)}
        if dataclasses.is_dataclass(tp):
            obj = self.dataclass(tp, key, path)
            if isinstance(key.shorthand, str):
                fields = {f.name: f for f in key_fields(tp)}
                short = fields[key.shorthand]
                first = self.field(short.type, short.key, (*path, *short.path))
                first.pop("description", None)  # the mapping's key, not the shorthand
                return {"oneOf": [first, obj]}
            return obj
        if origin in (tuple, frozenset):
            item_type, item_key = args[0], key.items or Key()
            pair = unwrap(item_type)[0]
            if get_origin(pair) is tuple:  # tuple[tuple[str, X], ...]: a mapping of names
                names = {} if key.names is None else _keywords(key.names, message=True)
                value = self.field(get_args(pair)[1], item_key, (*path, "*"))
                out = {"type": "object", **_keywords(key)}
                return {
                    **out,
                    **({"propertyNames": names} if names else {}),
                    "additionalProperties": value,
                }
            if key.by_name:
                value = self.field(item_type, item_key, (*path, "*"))
                names = {} if key.names is None else _keywords(key.names, message=True)
                return {
                    "type": "object",
                    **_keywords(key),
                    **({"propertyNames": names} if names else {}),
                    "additionalProperties": value,
                }
            items = self.field(item_type, item_key, (*path, "[]"), nullable=True)
            array = {"type": "array", **_keywords(key)}
            if key.unique_items:
                array["uniqueItems"] = True
            array["items"] = items
            if key.shorthand is True:
                return {"oneOf": [items, array]}
            return array
        raise TypeError(f"{'.'.join(path)}: no schema for {tp!r}: declare Key(schema=...)")

    def dataclass(self, cls: Any, key: Key, path: tuple[str, ...]) -> dict[str, Any]:
        fields = list(key_fields(cls))
        if key.fields:
            fields = [
                dataclasses.replace(f, key=merged(key.fields.get(f.name, Key()), f.key))
                for f in fields
            ]
        if any(f.key.forms for f in fields):
            return self.tagged(fields, path)
        properties: dict[str, Any] = {}
        required: list[str] = []
        nested: dict[str, dict[str, Any]] = {}
        for f in fields:
            shape = _defaulted(self.field(f.type, f.key, (*path, *f.path)), f)
            if len(f.path) == 1:
                properties[f.path[0]] = shape
            else:  # a key inside a mapping of its own (policy_external.cache.ttl_s)
                group = nested.setdefault(f.path[0], {})
                group[f.path[1]] = shape
                properties.setdefault(f.path[0], None)
            if f.key.required is True:
                required.append(f.path[0])
        for name, members in nested.items():
            inner = {"type": "object", "additionalProperties": False, "properties": members}
            properties[name] = self.described(inner, (*path, name))
        out: dict[str, Any] = {"type": "object", "additionalProperties": False}
        if required:
            out["required"] = required
        out.update(getattr(cls, "json_schema", {}))
        out["properties"] = properties
        return out

    def tagged(self, fields: list[Any], path: tuple[str, ...]) -> dict[str, Any]:
        """A mapping whose ``type`` picks which other keys it takes: one ``oneOf`` branch per
        form, each closed, its ``type`` a ``const``."""
        tag = next(f for f in fields if f.name == "type")
        branches = []
        for form in get_args(tag.type):
            properties: dict[str, Any] = {"type": self.described({"const": form}, (*path, "type"))}
            required = ["type"]
            for f in fields:
                if f is tag or form not in f.key.forms:
                    continue
                properties[f.path[0]] = _defaulted(self.field(f.type, f.key, (*path, *f.path)), f)
                if f.key.required is True or form in (f.key.required or ()):
                    required.append(f.path[0])
            branches.append(
                {
                    "type": "object",
                    "additionalProperties": False,
                    "required": required,
                    "properties": properties,
                }
            )
        return {"oneOf": branches}


def _keywords(key: Key, *, message: bool = False) -> dict[str, Any]:
    out = {}
    for attr, keyword in _KEYWORDS:
        value = getattr(key, attr)
        if value is not None:
            out[keyword] = value
    if message and key.message is not None:
        out["x-message"] = key.message
    return out


def _defaulted(shape: dict[str, Any], field: Any) -> dict[str, Any]:
    """``shape`` with the key's default (what the file means by leaving the key out) when JSON
    can say it: editors offer it. None, an empty string or list, a section: no default shown."""
    default = field.key.default if field.key.default is not UNSET else field.default
    if isinstance(default, Rate):
        unit = {1.0: "second", 60.0: "minute", 3600.0: "hour"}[default.per_s]
        default = f"{default.count}/{unit}"
    elif isinstance(default, tuple) and default and all(isinstance(v, str) for v in default):
        default = list(default)
    if not isinstance(default, bool | int | float | str | list) or default == "":
        return shape
    if "description" not in shape:
        return {"default": default, **shape}
    return {"description": shape["description"], "default": default, **shape}


def dotted(path: tuple[str, ...]) -> str:
    """``("input_requests", "seal_keys", "[]", "id")`` -> ``input_requests.seal_keys[].id``."""
    return ".".join(path).replace(".[]", "[]")


def _agree(known: Any, other: Any) -> None:
    """Drop from ``known`` each description ``other`` words differently (same shape)."""
    if isinstance(known, dict) and isinstance(other, dict):
        theirs = other.get("description")
        if theirs is not None and known.get("description", theirs) != theirs:
            del known["description"]
        for name, value in known.items():
            _agree(value, other.get(name))
    elif isinstance(known, list) and isinstance(other, list):
        for mine, theirs in zip(known, other, strict=False):
            _agree(mine, theirs)


def _plain(shape: Any) -> Any:
    """``shape`` without descriptions (what two uses of one shared shape must agree on)."""
    if isinstance(shape, dict):
        return {k: _plain(v) for k, v in shape.items() if k != "description"}
    if isinstance(shape, list):
        return [_plain(v) for v in shape]
    return shape


_CELL: Final = re.compile(r"(?<!\\)\|")
_ROW: Final = re.compile(r"^\| `([a-z_.<>\[\]]+)` \|")


def descriptions(text: str) -> dict[str, str]:
    """Key path (``issuer.cache.max_ttl_s``) -> the Meaning of its row in configuration.md."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        cells = [cell.strip() for cell in _CELL.split(line.strip()[1:-1])]
        if len(cells) == 5 and cells[4]:
            out[match.group(1).replace("<name>", "*")] = cells[4]
    return out


class Declared(NamedTuple):
    """One key as the reference documents it: its path, type, declaration and default in the
    file (``key.default`` where the file's differs from the field's)."""

    path: str
    type: Any
    key: Key
    default: Any


def declared_keys(cls: Any = Config, prefix: str = "") -> list[Declared]:
    """Every declared key under ``cls``, by the path the reference documents it at: the
    entries of ``issuers`` as ``issuer.*``, a ``backends`` entry's keys as ``backend.*``
    (configuration.md says so); a shape written out (``Key.schema``) is one key."""
    out: list[Declared] = []
    for f in key_fields(cls):
        path = prefix + dotted(f.path)
        default = f.key.default if f.key.default is not UNSET else f.default
        out.append(Declared(path, f.type, f.key, default))
        for name, extra in (f.key.extend or {}).items():
            if not f.key.by_name:
                out.append(Declared(f"{path}.{name}", str, extra, UNSET))
        if f.key.items is not None and f.key.items.extend and f.key.by_name:
            for name, extra in f.key.items.extend.items():
                out.append(Declared(f"{path}.<name>.{name}", str, extra, UNSET))
        if f.key.schema is not None or getattr(f.type, "from_yaml", None) is not None:
            continue
        nested = f.type
        if get_origin(nested) in (tuple, frozenset):
            nested = unwrap(get_args(nested)[0])[0]
            if f.key.ref is not None or (f.key.items is not None and f.key.items.ref):
                continue  # backends, issuers: documented as backend.*, issuer.*
            if f.key.by_name:  # guardrails: each entry's keys as guardrails.<name>.*
                out.extend(declared_keys(nested, f"{path}.<name>."))
                continue
            if dataclasses.is_dataclass(nested):
                out.extend(declared_keys(nested, f"{path}[]."))
            continue
        if dataclasses.is_dataclass(nested):
            site = f.key.fields or {}
            for inner in declared_keys(nested, f"{path}."):
                here = site.get(inner.path.rsplit(".", 1)[1])
                if here is None:
                    out.append(inner)
                    continue
                key = merged(here, inner.key)  # the site's own declaration (groups.claim)
                default = key.default if key.default is not UNSET else inner.default
                out.append(Declared(inner.path, inner.type, key, default))
    return out


def render() -> str:
    document = Deriver(descriptions(DOCS.read_text(encoding="utf-8"))).document()
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    stale = [
        path for path in TARGETS if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
    if "--check" in argv:
        for path in stale:
            print(
                f"{path.relative_to(ROOT)} is out of date: run scripts/config_schema.py",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path in stale:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
