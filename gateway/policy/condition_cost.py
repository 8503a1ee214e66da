"""What a ``when:`` expression can cost at most, over the largest inputs it can be given.

The CEL library has no cost limit and cannot be interrupted (it holds the GIL while it runs), so
the bound is static: :func:`cost_of` walks the expression's tree (:mod:`.cel_syntax`) with an
upper bound on the size of every variable, and ``check`` refuses an expression (and a rule)
whose worst case exceeds :data:`BUDGET` (docs/policy.md#cost).

Units are nanoseconds on the reference machine, each constant rounded up from a measurement
of the library (``common-expression-language`` 0.10): a bound, not a prediction. Sizes are
counted in *weight*: one per value (map, list, number, string, map entry) plus one per
:data:`CHARACTERS_PER_WEIGHT` characters of a string.

Where the inputs come from, and so their bounds:

- ``arguments``: the caller's. Only what a rule's conditions read is given to them
  (:attr:`.conditions.Condition.argument_keys`), and the call is refused beyond
  :data:`.conditions.MAX_ARGUMENT_VALUES` values or
  :data:`.conditions.MAX_ARGUMENT_CHARACTERS` characters of it. The library converts it from
  Python at every read (up to 1 µs a value).
- the token facts: the issuer's, converted once per principal; bounded by the size of a token
  (:data:`TOKEN_BYTES`).
- ``resource``: the caller's, at most 2,048 characters (:data:`.uri.MAX_URI_LENGTH`); ``tool``
  and ``prompt``: names in a catalog (a tool's at most 64 characters and its prefix), bounded the
  same.

A comprehension's body runs once per element. Its cost is summed with the elements' weights
adding up to the range's: every bound here is convex in a variable's weight, so the sum is
largest with one element holding all of it (``(n - 1) * f(1) + f(W)``) rather than ``n`` times
the largest element.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gateway.policy.cel_syntax import Node
from gateway.policy.conditions import (
    MAX_ARGUMENT_CHARACTERS,
    MAX_ARGUMENT_VALUES,
    MAX_GLOB_PATTERN,
)
from gateway.policy.regex_cost import regex_cost
from gateway.policy.uri import MAX_URI_LENGTH

__all__ = [
    "BUDGET",
    "CHARACTERS_PER_WEIGHT",
    "TIMESTAMP_ACCESSORS",
    "TOKEN_BYTES",
    "CostUnbounded",
    "cost_of",
]

BUDGET: Final = 50_000_000
"""The most a rule's conditions may cost together, in ns: 50 ms on the reference machine."""
TOKEN_BYTES: Final = 16_384
"""The largest token facts: an introspection answer is at most 16 KiB, a JWT at most 16,000
characters (``gateway.auth``: ``MAX_RESPONSE_BYTES``, the largest ``max_token_bytes``)."""
CHARACTERS_PER_WEIGHT: Final = 32

STEP: Final = 100
"""Evaluating one node: a literal, a name, a field, an operator, a call."""
ITERATION: Final = 300
"""One element of a comprehension."""
CONVERT: Final = 2_500
"""Converting one weight of a per-call value from Python (at every read of it)."""
LINEAR: Final = 4
"""One weight of a linear operation: compare, search, hash, count characters."""
COPY: Final = 75
"""One weight of a value copied: the library copies a call's operands and a literal's items
whole (40 to 60 ns a value; a select or an index does not copy)."""
GLOB_CALL: Final = 2_000
"""Calling the gateway's ``glob`` (a Python function) once."""
GLOB_PATTERN: Final = 20_000
"""Compiling a ``glob`` pattern that is not a literal, per weight (cached per pattern, but a
caller can send a new one every time)."""
GLOB_CHARACTER: Final = 5
"""``glob``: a character of the name, per piece of the pattern (a literal piece is a
``str.find``; one with ``?`` a search of a quantifier-free regex, per character of it)."""


class CostUnbounded(ValueError):
    """The expression's cost cannot be bounded (the message says why, for ``check``)."""


@dataclass(frozen=True, slots=True)
class _Size:
    n: float
    """Elements of a list or map (1 for anything else)."""
    v: float
    """Values in it, itself included (so also the most elements of any list or map in it)."""
    w: float
    """Weight (module docstring): at least ``v``."""


_SCALAR: Final = _Size(1, 1, 1)


def _text(characters: int) -> _Size:
    return _Size(1, 1, 1 + -(-characters // CHARACTERS_PER_WEIGHT))


def _document(values: int, characters: int) -> _Size:
    return _Size(values, values, values + _text(characters).w)


def _part(whole: _Size) -> _Size:
    """What a field, an index or an element of ``whole`` can be."""
    return _Size(whole.v, whole.v, whole.w)


_TOKEN_DOCUMENT: Final = _document(TOKEN_BYTES // 2, TOKEN_BYTES)
"""``claims``, ``scopes``: a JSON value is at least two bytes (``0,``)."""
_ARGUMENTS: Final = _document(MAX_ARGUMENT_VALUES, MAX_ARGUMENT_CHARACTERS)
_NAME: Final = _text(MAX_URI_LENGTH)
_VARIABLES: Final[dict[str, tuple[_Size, bool]]] = {
    "claims": (_TOKEN_DOCUMENT, False),
    "scopes": (_TOKEN_DOCUMENT, False),
    "subject": (_text(TOKEN_BYTES), False),
    "client_id": (_text(TOKEN_BYTES), False),
    "issuer": (_text(TOKEN_BYTES), False),
    "auth_method": (_text(32), False),
    "tool": (_NAME, True),
    "prompt": (_NAME, True),
    "resource": (_NAME, True),
    "arguments": (_ARGUMENTS, True),
    "backend": (_text(256), True),
    "request": (_document(2, 66), True),
    "now": (_SCALAR, True),
}
"""Each variable's bound, and whether it is converted at every read (a per-call value)."""
TIMESTAMP_ACCESSORS: Final = (
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
)
"""CEL's timestamp field accessors (a constant cost each)."""
_LINEAR_CALLS: Final = frozenset(
    {"contains", "startsWith", "endsWith", "==", "!=", "<", "<=", ">", ">=", "size"}
)
_CONVERSIONS: Final = frozenset(
    {"int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration", "dyn", "type"}
)
_PASSING: Final = frozenset({"&&", "||", "!", "?:"})
"""Operators that hand their operands on without copying them."""
_CONSTANT_CALLS: Final = frozenset(
    {
        "&&",
        "||",
        "!",
        "-",
        "*",
        "/",
        "%",
        "neg",
        *TIMESTAMP_ACCESSORS,
    }
)


def cost_of(tree: Node) -> int:
    """The most evaluating ``tree`` can cost (ns), over the bounds of the module docstring.
    Raises :class:`CostUnbounded` for what has no bound (a ``matches`` pattern that is not a
    literal)."""
    cost, _ = _cost(tree, {})
    return int(cost)


def _cost(node: Node, scope: dict[str, _Size]) -> tuple[float, _Size]:
    kind = node.kind
    if kind == "ident":
        return _name(node.text, scope)
    if kind in ("string", "bytes"):
        return STEP, _text(len(node.text))
    if kind in ("int", "uint", "double", "bool", "null"):
        return STEP, _SCALAR
    if kind == "macro":
        return _comprehension(node, scope)
    parts = [_cost(arg, scope) for arg in node.args]
    below = sum(cost for cost, _ in parts) + STEP
    sizes = [size for _, size in parts]
    if kind in ("select", "index"):
        key = sizes[1].w if kind == "index" else 0
        return below + LINEAR * key, _part(sizes[0])
    if kind == "has":
        return below + LINEAR, _SCALAR
    weights = sum(size.w for size in sizes)
    if kind in ("list", "map", "struct"):
        count = len(sizes) // 2 if kind == "map" else len(sizes)
        values = 1 + sum(s.v for s in sizes)
        return below + COPY * weights, _Size(count, values, values + weights)
    if node.text in _PASSING:
        return _call(node, below, sizes)
    return _call(node, below + COPY * weights, sizes)


def _name(name: str, scope: dict[str, _Size]) -> tuple[float, _Size]:
    if name in scope:
        return STEP, scope[name]
    bound = _VARIABLES.get(name)
    if bound is None:
        return STEP, _SCALAR  # a type name (``string``): compile_condition refused the rest
    size, per_call = bound
    return STEP + (CONVERT * size.w if per_call else 0), size


def _call(node: Node, below: float, sizes: list[_Size]) -> tuple[float, _Size]:
    name = node.text
    weights = sum(size.w for size in sizes)
    if name in _CONSTANT_CALLS:
        return below, _SCALAR
    if name in _LINEAR_CALLS:
        return below + LINEAR * weights, _SCALAR
    if name in _CONVERSIONS:
        return below + LINEAR * weights, _Size(sizes[0].n, sizes[0].v, sizes[0].w + 1)
    if name == "in":  # compared with every element (or hashed, for a map's keys)
        return below + LINEAR * (weights + sizes[1].n), _SCALAR
    if name == "+":  # strings and lists are copied
        first, second = sizes
        return below + LINEAR * weights, _Size(first.n + second.n, first.v + second.v, weights)
    if name == "?:":
        _, then, otherwise = sizes
        widest = _Size(max(then.n, otherwise.n), max(then.v, otherwise.v), max(then.w, otherwise.w))
        return below, widest
    if name == "matches":
        pattern = node.args[-1]
        if pattern.kind != "string":
            raise CostUnbounded(
                "the pattern of matches() must be a string literal (the library compiles it "
                "at every evaluation: one from a claim or an argument has no bounded cost)"
            )
        regex = regex_cost(pattern.text)
        characters = sizes[0].w * CHARACTERS_PER_WEIGHT
        return below + regex.compile_ns + regex.scan_ns_per_char * characters, _SCALAR
    if name == "glob":
        return below + _glob(node.args[-1], sizes[0]), _SCALAR
    raise CostUnbounded(f"cannot bound the cost of {name}()")


def _glob(pattern: Node, value: _Size) -> float:
    """``glob(value, pattern)``: each piece of the pattern (between ``*``) is searched for in
    the value, a piece with ``?`` at every character of itself."""
    characters = value.w * CHARACTERS_PER_WEIGHT
    if pattern.kind != "string":  # compiled at the call (its Glob is cached, but per pattern)
        worst = GLOB_PATTERN * _text(MAX_GLOB_PATTERN).w
        return GLOB_CALL + worst + GLOB_CHARACTER * characters * (2 * MAX_GLOB_PATTERN + 1)
    if len(pattern.text) > MAX_GLOB_PATTERN:
        raise CostUnbounded(f"glob patterns are at most {MAX_GLOB_PATTERN} characters")
    pieces = pattern.text.split("*")
    searched = len(pieces) + sum(len(piece) for piece in pieces if "?" in piece)
    return GLOB_CALL + GLOB_CHARACTER * characters * searched


def _comprehension(node: Node, scope: dict[str, _Size]) -> tuple[float, _Size]:
    """``range.macro(x, ...)``: the range once, the body once per element (module docstring:
    summed as ``(n - 1) * f(1) + f(W)``)."""
    source, variable, *body = node.args
    cost, over = _cost(source, scope)
    elements, total = over.n, over.w

    def once(weight: float) -> tuple[float, _Size]:
        # An element of this weight has at most as many values (no min() with the range's
        # values: the sum above needs every bound convex in the weight).
        inner = {**scope, variable.text: _Size(weight, weight, weight)}
        found = [_cost(part, inner) for part in body]
        return sum(c for c, _ in found), found[-1][1]

    (small, one), (large, big) = once(1), once(total)
    rest = max(elements - 1, 0)
    cost += elements * ITERATION + rest * small + large
    if node.text in ("all", "exists", "exists_one"):
        return cost, _SCALAR
    if node.text == "filter":
        result = over
    else:
        values = 1 + rest * one.v + big.v
        result = _Size(elements, values, values + rest * one.w + big.w)
    # map and filter copy the list they build at every element (quadratic: 0.9 s for 3,000)
    return cost + COPY * elements * result.w, result
