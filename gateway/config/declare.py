"""How a key of ``gateway.yaml`` is declared: once, as a field of a frozen config dataclass.

The field gives the key's name, Python type and default; :class:`Key` in its ``Annotated``
metadata gives what a type cannot say (bounds, forms, the YAML name when it differs). From these
declarations ``scripts/config_schema.py`` writes ``gateway/schema/gateway.schema.json`` and its
``docs/schema`` copy, and a test checks docs/configuration.md's table against them; at load
:func:`fill` reads each declared key of a (schema-valid) mapping into the dataclass, so a default
is written nowhere but in the field.

How a type maps to the file (and to the schema): ``int``, ``float``, ``bool``, ``str`` and
``Literal`` are the JSON scalars; ``tuple[X, ...]`` (and ``frozenset[X]``) a list;
``tuple[tuple[str, X], ...]`` a mapping of names to values; a nested dataclass a mapping of its
own keys (unknown keys refused); ``X | None`` with a ``None`` default is an optional key (absent:
``None``; ``null`` is not a value unless the type says so, as
:data:`~gateway.config.limits_model.RateLimit` does).

The model modules do without ``from __future__ import annotations``: their annotations are
evaluated once at import, where reading them back as strings at the first load took four times
as long (11 ms for the 33 classes).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

__all__ = [
    "INTERNAL",
    "Key",
    "KeyField",
    "Reader",
    "Seconds",
    "fill",
    "key_fields",
    "merged",
    "unwrap",
]

T = typing.TypeVar("T")


UNSET: Final[Any] = type("Unset", (), {"__repr__": lambda self: "UNSET"})()
"""No :attr:`Key.default` (the field's default applies)."""


@dataclass(frozen=True, slots=True, eq=False)
class Key:
    """A field's place in ``gateway.yaml``: JSON Schema keywords (snake case) and the facts a
    Python type cannot carry. Every attribute is optional; most keys need two or three.
    (Compared by identity: ``Annotated`` metadata is hashed, and ``schema`` is a mapping.)"""

    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None
    min_items: int | None = None
    max_items: int | None = None
    unique_items: bool = False
    min_properties: int | None = None
    max_properties: int | None = None
    items: Key | None = None
    """Each list item, or each value of a mapping of names."""
    names: Key | None = None
    """Each name of a mapping of names (``propertyNames``)."""
    message: str | None = None
    """What to write instead, in ``check``'s message for a wrong form (``x-message``)."""
    ref: str | None = None
    """The shape is shared: it lives once in the schema's ``$defs`` under this name."""
    yaml: str | None = None
    """The key in the file when it is not the field's name; ``a.b``: ``b`` inside mapping ``a``."""
    required: bool | tuple[str, ...] = False
    """Must be written; a tuple: in those forms of a tagged mapping only (``type: bearer``)."""
    forms: tuple[str, ...] = ()
    """A key of a tagged mapping (one with a ``type``) that only those forms take."""
    shorthand: bool | str = False
    """A shorter spelling is accepted too: True, one item for a list; a field's name, that
    field's value alone for the whole mapping (``dpop: required``)."""
    schema: Mapping[str, Any] | None = None
    """The schema written out, instead of derived from the type (the few keys of unusual form)."""
    default: Any = UNSET
    """The value when the file leaves this key out but writes its section, where that is not the
    field's default (which stands for the whole section left out): ``dpop: {nonce: true}``
    means ``mode: allowed``, while no ``dpop`` at all is ``off``."""
    fields: Mapping[str, Key] | None = None
    """Declarations of a nested dataclass's keys at this site: for a dataclass declared outside
    the config package (``limits.json``), or a default of its own here (``groups.claim``)."""
    extend: Mapping[str, Key] | None = None
    """With ``ref``: keys this site takes besides the shared shape's (``backend.name_prefix``,
    ``backends.<name>.prefix``); any other key is refused."""
    by_name: bool = False
    """A tuple of dataclasses written as a mapping of names to entries (``backends``)."""
    internal: bool = False
    """Not a key of the file: set by the loader (``Config.source``, ``BackendConfig.name``)."""


class Undeclared(RuntimeError):
    """A declared key whose type :func:`fill` cannot read (never swallowed as a bad value)."""


_EMPTY: Final = Key()
INTERNAL: Final = Key(internal=True)
"""The declaration of a field that is not a key of the file."""

Seconds = Annotated[float, Key(ref="seconds", exclusive_minimum=0, maximum=86_400)]
"""A duration in seconds: more than 0, at most a day (the ``*_s`` keys without bounds of their
own)."""


@dataclass(frozen=True, slots=True)
class KeyField:
    """One declared key of a dataclass: the field, its YAML path and its declaration."""

    name: str
    path: tuple[str, ...]
    """Within the dataclass's mapping: ``("timeout_s",)``, or ``("cache", "ttl_s")``."""
    type: Any
    """The field's type with ``Annotated`` and ``| None`` taken off."""
    key: Key
    default: Any
    """The dataclass default (``dataclasses.MISSING`` when the field has none)."""


def unwrap(tp: Any) -> tuple[Any, Key, bool]:
    """``(type, key, optional)``: ``Annotated`` metadata merged (the outer one wins) and a
    ``None`` member of a union taken off."""
    key = _EMPTY
    optional = False
    while True:
        if get_origin(tp) is typing.Annotated:
            base, *meta = get_args(tp)
            for item in meta:
                if isinstance(item, Key):
                    key = merged(item, key)
            tp = base
        elif get_origin(tp) in (Union, types.UnionType) and type(None) in get_args(tp):
            rest = [arg for arg in get_args(tp) if arg is not type(None)]
            optional = True
            tp = rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007
        else:
            return tp, key, optional


def merged(outer: Key, inner: Key) -> Key:
    """``inner`` with every attribute ``outer`` sets replaced by ``outer``'s."""
    if inner is _EMPTY:
        return outer
    changes = {
        f.name: getattr(outer, f.name)
        for f in dataclasses.fields(Key)
        if getattr(outer, f.name) != f.default
    }
    return dataclasses.replace(inner, **changes)


def key_fields(cls: Any) -> tuple[KeyField, ...]:
    """The declared keys of config dataclass ``cls``, in field order (internal fields left out)."""
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in dataclasses.fields(cls):
        tp, key, _ = unwrap(hints[f.name])
        if key.internal:
            continue
        default: Any = f.default
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        path = tuple((key.yaml or f.name).split("."))
        out.append(KeyField(f.name, path, tp, key, default))
    return _FIELDS.setdefault(cls, tuple(out))


_FIELDS: dict[Any, tuple[KeyField, ...]] = {}
"""Per class: read once (``get_type_hints`` evaluates every annotation)."""


class Reader(typing.Protocol):
    """What :func:`fill` needs for the values that are more than JSON: secret references
    (resolved, problems recorded at ``path``) and paths (relative to the file's directory)."""

    def secret(self, raw: Any, path: tuple[str | int, ...]) -> Any: ...

    def path(self, raw: str) -> Path: ...


def fill(
    reader: Reader,
    cls: type[T],
    raw: Any,
    where: tuple[str | int, ...],
    *,
    leave: tuple[str, ...] = (),
    **given: Any,
) -> T:
    """``cls`` from the mapping ``raw`` at ``where``: each declared key that is written is
    converted by its type, the others keep the field's default (a nested mapping: the default's
    values, so ``listen: {port: 8081}`` keeps the host); ``given`` fields (what a section builder
    computed or checked itself) win, and ``leave`` fields keep their default (the builder
    replaces them later, in the order their problems are reported).

    A value of the wrong type keeps the default: the schema has reported it already, and
    ``check`` goes on to the section's other findings (a missing secret among them)."""
    values = _values(reader, cls, raw, where, {**dict.fromkeys(leave), **given})
    return cls(**values, **given)


def _values(
    reader: Reader,
    cls: Any,
    raw: Any,
    where: tuple[str | int, ...],
    given: Mapping[str, Any],
    *,
    site: Mapping[str, Key] | None = None,
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field in key_fields(cls):
        if field.name in given:
            continue
        key = (
            field.key
            if site is None or field.name not in site
            else merged(site[field.name], field.key)
        )
        found, value = _lookup(raw, field.path)
        if not found:
            if key.default is not UNSET:
                values[field.name] = key.default
            continue
        try:
            values[field.name] = _convert(
                reader, field.type, key, value, (*where, *field.path), default=field.default
            )
        except (TypeError, ValueError, KeyError, AttributeError):
            continue
    return values


def declared_default(cls: Any, name: str) -> Any:
    """The default of field ``name`` of ``cls`` (a fresh one for a ``default_factory``)."""
    for field in dataclasses.fields(cls):
        if field.name == name:
            if field.default_factory is not dataclasses.MISSING:
                return field.default_factory()
            return field.default
    raise KeyError(name)


def _lookup(raw: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    node: Any = raw
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


_SCALARS: Final[dict[Any, Callable[[Any], Any]]] = {int: int, float: float, bool: bool, str: str}


def _convert(
    reader: Reader,
    tp: Any,
    key: Key,
    value: Any,
    where: tuple[str | int, ...],
    *,
    default: Any = dataclasses.MISSING,
) -> Any:
    tp, inner, _ = unwrap(tp)
    key = merged(key, inner)
    if value is None:
        return None
    if tp in _SCALARS:
        return _SCALARS[tp](value)
    if get_origin(tp) is Literal:
        return value
    convert = getattr(tp, "from_yaml", None)
    if convert is not None:  # a value type with a spelling of its own (Rate: 10/minute)
        return convert(value)
    if dataclasses.is_dataclass(tp):
        nested: type[Any] = tp  # type: ignore[assignment]  # a class: unwrap returns types
        if isinstance(key.shorthand, str) and not isinstance(value, Mapping):
            value = {key.shorthand: value}
        values = _values(reader, nested, value, where, {}, site=key.fields)
        if dataclasses.is_dataclass(default) and not isinstance(default, type):
            # The field's own default is the base (Config.listen vs Config.ops_listen).
            return dataclasses.replace(default, **values)
        return nested(**values)
    origin, args = get_origin(tp), get_args(tp)
    if origin in (tuple, frozenset):
        item_type = args[0]
        if get_origin(unwrap(item_type)[0]) is tuple:  # tuple[tuple[str, X], ...]: a mapping
            value_type = get_args(unwrap(item_type)[0])[1]
            return tuple(
                (name, _convert(reader, value_type, Key(), item, (*where, name)))
                for name, item in value.items()
            )
        if key.shorthand is True and not isinstance(value, list):
            value = [value]
        items = (
            _convert(reader, item_type, Key(), item, (*where, index))
            for index, item in enumerate(value)
        )
        return frozenset(items) if origin is frozenset else tuple(items)
    if key.ref == "secret":
        return reader.secret(value, where)
    if tp is Path:
        return reader.path(value)
    raise Undeclared(f"{tp!r} has no conversion from YAML: give the field to fill()")
