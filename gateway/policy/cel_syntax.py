"""The shape of a ``when:`` expression, for the load-time checks that need it: its nesting, the
names its comprehensions bind, the argument names it reads, and its cost (:mod:`.condition_cost`).

``common-expression-language`` compiles and evaluates; it offers no syntax tree. This parser
follows the CEL grammar (cel-spec ``doc/langdef.md`` §Syntax) to the depth those checks need and
evaluates nothing. An expression is given to it only after the library compiled it; one it still
cannot read is refused ("cannot bound"), never evaluated unchecked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

__all__ = ["MACROS", "CelSyntaxError", "Node", "TooDeep", "parse"]

MACROS: Final = frozenset({"all", "exists", "exists_one", "map", "filter"})
"""Comprehension macros: ``range.all(x, predicate)``; ``map`` may take a filter first."""


@dataclass(frozen=True, slots=True)
class Node:
    """One node. ``kind``: a literal (``int``, ``uint``, ``double``, ``bool``, ``null``,
    ``string``, ``bytes``: ``text`` is the decoded value for the last two), ``ident``,
    ``select`` (``args[0].text``), ``has`` (``has(args[0].text)``), ``index``, ``call``
    (``text`` a function or operator, a member call's receiver first), ``list``, ``map``
    (keys and values alternating), ``struct``, or ``macro`` (``text`` the macro, ``args``:
    the range, the variable as an ``ident``, then the macro's expressions)."""

    kind: str
    text: str = ""
    args: tuple[Node, ...] = ()

    def walk(self) -> Iterator[Node]:
        """This node and every node below it."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.args)


class CelSyntaxError(ValueError):
    """The expression is not CEL this parser reads."""


class TooDeep(CelSyntaxError):
    """Brackets nested deeper than the limit given to :func:`parse`."""


_TOKEN: Final = re.compile(
    r"""\s+|//[^\n]*"""
    r"""|(?P<string>(?P<prefix>[rRbB]{0,2})(?P<quoted>'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))"""
    r"""|(?P<number>0[xX][0-9a-fA-F]+[uU]?|\d*\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+[uU]?)"""
    r"""|(?P<ident>[A-Za-z_][A-Za-z0-9_]*|`[^`]+`)"""
    r"""|(?P<op>&&|\|\||==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}])""",
    re.DOTALL,
)
_RELATIONS: Final = frozenset({"<", "<=", ">=", ">", "==", "!=", "in"})
_ESCAPE: Final = re.compile(
    r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-7]{3})|(.))", re.DOTALL
)
_WORDS: Final = {
    "in": ("op", "in"),
    "null": ("null", "null"),
    "true": ("bool", "true"),
    "false": ("bool", "false"),
}
_SIMPLE_ESCAPES: Final = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}


def parse(source: str, max_depth: int) -> Node:
    """The expression's tree. Raises :class:`TooDeep` past ``max_depth`` nested brackets
    (checked first, on the tokens: the parser recurses only into brackets),
    :class:`CelSyntaxError` for anything else it cannot read."""
    try:
        tokens = _tokens(source)
    except ValueError as exc:  # an escape that is no character (\U00110000)
        raise CelSyntaxError(str(exc)) from None
    depth = 0
    for kind, text in tokens:
        if kind == "op" and text in "([{":
            depth += 1
            if depth > max_depth:
                raise TooDeep(f"nested deeper than {max_depth} brackets")
        elif kind == "op" and text in ")]}":
            depth -= 1
    try:
        return _Parser(tokens).expression_only()
    except (IndexError, ValueError) as exc:  # past the end; an escape that is no character
        raise CelSyntaxError(str(exc)) from None


def _tokens(source: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    position = 0
    while position < len(source):
        match = _TOKEN.match(source, position)
        if match is None:
            raise CelSyntaxError(f"unexpected character at {position}")
        position = match.end()
        kind = match.lastgroup
        if kind is None:
            continue  # whitespace, comment
        if kind == "string":
            prefix = (match.group("prefix") or "").lower()
            quoted = match.group("quoted")
            quote = 3 if quoted[:3] in ("'''", '"""') else 1
            body = quoted[quote:-quote]
            text = body if "r" in prefix else _unescape(body)
            found.append(("bytes" if "b" in prefix else "string", text))
        elif kind == "ident" and match.group(0) in _WORDS:
            found.append(_WORDS[match.group(0)])
        else:
            found.append((kind, match.group(0).strip("`")))
    found.append(("end", ""))
    return found


def _unescape(body: str) -> str:
    def one(match: re.Match[str]) -> str:
        hex2, hex4, hex8, octal, other = match.groups()
        code = hex2 or hex4 or hex8
        if code is not None:
            return chr(int(code, 16))
        if octal is not None:
            return chr(int(octal, 8))
        return _SIMPLE_ESCAPES.get(other, other)

    return _ESCAPE.sub(one, body)


class _Parser:
    """Recursive descent over the tokens; it recurses only into brackets (whose nesting
    :func:`parse` bounded), operators and conditional branches are loops."""

    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.at = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.at]

    def take(self, text: str | None = None) -> tuple[str, str]:
        token = self.tokens[self.at]
        if text is not None and token != ("op", text):
            raise CelSyntaxError(f"expected {text!r}")
        self.at += 1
        return token

    def accept(self, text: str) -> bool:
        if self.tokens[self.at] == ("op", text):
            self.at += 1
            return True
        return False

    def expression_only(self) -> Node:
        node = self.expression()
        if self.peek()[0] != "end":
            raise CelSyntaxError("unexpected text after the expression")
        return node

    def nested(self, close: str) -> list[Node]:
        """Expressions separated by commas up to ``close`` (a trailing comma allowed)."""
        items: list[Node] = []
        while not self.accept(close):
            items.append(self.expression())
            if not self.accept(","):
                self.take(close)
                break
        return items

    def expression(self) -> Node:
        # `a ? b : c ? d : e` without recursion: the else branches chain to the right.
        branches: list[tuple[Node, Node]] = []
        node = self.binary(0)
        while self.accept("?"):
            then = self.binary(0)
            self.take(":")
            branches.append((node, then))
            node = self.binary(0)
        for condition, then in reversed(branches):
            node = Node("call", "?:", (condition, then, node))
        return node

    _LEVELS: Final = (
        frozenset({"||"}),
        frozenset({"&&"}),
        _RELATIONS,
        frozenset({"+", "-"}),
        frozenset({"*", "/", "%"}),
    )

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while (token := self.peek())[0] == "op" and token[1] in self._LEVELS[level]:
            self.take()
            node = Node("call", token[1], (node, self.binary(level + 1)))
        return node

    def unary(self) -> Node:
        signs: list[str] = []
        while (token := self.peek()) in (("op", "!"), ("op", "-")):
            self.take()
            signs.append("!" if token[1] == "!" else "neg")
        node = self.member()
        for sign in reversed(signs):
            node = Node("call", sign, (node,))
        return node

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.accept("."):
                kind, name = self.take()
                if kind != "ident":
                    raise CelSyntaxError("expected a field or method name after '.'")
                is_call = self.accept("(")
                node = self.call(name, node) if is_call else Node("select", name, (node,))
            elif self.accept("["):
                node = Node("index", "", (node, *self.exactly(1, "]")))
            elif self.peek() == ("op", "{") and _is_type_name(node):
                self.take()
                node = Node("struct", "", tuple(self.fields()))
            else:
                return node

    def exactly(self, count: int, close: str) -> list[Node]:
        items = self.nested(close)
        if len(items) != count:
            raise CelSyntaxError("wrong number of expressions")
        return items

    def call(self, name: str, receiver: Node | None) -> Node:
        arguments = self.nested(")")
        if receiver is not None and name in MACROS and arguments[:1]:
            variable = arguments[0]
            if variable.kind != "ident" or len(arguments) not in (2, 3 if name == "map" else 2):
                raise CelSyntaxError(f"malformed {name}() macro")
            return Node("macro", name, (receiver, *arguments))
        if receiver is None and name == "has":
            if len(arguments) != 1 or arguments[0].kind != "select":
                raise CelSyntaxError("has() takes one field selection")
            return Node("has", arguments[0].text, arguments[0].args)
        return Node("call", name, (*(() if receiver is None else (receiver,)), *arguments))

    def fields(self) -> list[Node]:
        """``{name: value, ...}`` of a struct: the values (the names are no expressions)."""
        return self.entries(lambda: self.take()[0] == "ident" or _no("a field name"))[1::2]

    def primary(self) -> Node:
        kind, text = self.take()
        if kind == "ident":
            if self.accept("("):
                return self.call(text, None)
            return Node("ident", text)
        if kind in ("string", "bytes", "bool", "null"):
            return Node(kind, text)
        if kind == "number":
            return Node(_number_kind(text), text)
        if (kind, text) == ("op", "("):
            return self.exactly(1, ")")[0]
        if (kind, text) == ("op", "["):
            return Node("list", "", tuple(self.nested("]")))
        if (kind, text) == ("op", "{"):
            return self.map_literal()
        if (kind, text) == ("op", "."):  # a leading dot: a name in the root scope
            return self.primary()
        raise CelSyntaxError(f"unexpected {text or kind!r}")

    def map_literal(self) -> Node:
        return Node("map", "", tuple(self.entries(self.expression)))

    def entries(self, key: Callable[[], object]) -> list[Node]:
        """``key: value`` pairs up to ``}`` (a trailing comma allowed): the keys (a ``null``
        where ``key`` returns no node) and values alternating."""
        found: list[Node] = []
        while not self.accept("}"):
            name = key()
            found.append(name if isinstance(name, Node) else Node("null"))
            self.take(":")
            found.append(self.expression())
            if not self.accept(","):
                self.take("}")
                break
        return found


def _no(what: str) -> bool:
    raise CelSyntaxError(f"expected {what}")


def _is_type_name(node: Node) -> bool:
    """Whether ``node`` can name a message type (``a.b.Type{...}``)."""
    while node.kind == "select":
        node = node.args[0]
    return node.kind == "ident"


def _number_kind(text: str) -> str:
    if text[-1] in "uU":
        return "uint"
    if not text.lower().startswith("0x") and any(c in text for c in ".eE"):
        return "double"
    return "int"
