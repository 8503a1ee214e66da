"""What a ``matches()`` pattern costs: the CEL library compiles its pattern (RE2 syntax, the
Rust ``regex`` crate) again at every evaluation, so that compilation is part of every call.

The estimate follows the compiled program's size, which is what the compilation costs: Unicode
classes are large (``\\w`` alone about 0.2 ms here, ``\\w{100}`` about 100 ms), ASCII ones small,
and a counted repetition (``{n,m}``) copies what it repeats ``m`` times. Per atom, in
microseconds on the reference machine, rounded up: see :data:`_ATOM`. Matching is linear in the
text (the crate has no backtracking), about 2 to 6 ns a character, more for a large program.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["RegexCost", "regex_cost"]

_ATOM: Final = {
    "literal": 1,
    "folded": 4,
    "ascii": 2,
    "wide": 5,
    "digit_space": 30,
    "unicode": 1000,
}
"""Compile cost per atom (µs): a literal character; one under ``(?i)``; an ASCII class; ``.``,
a negated class or one with non-ASCII members; ``\\d``, ``\\s``, ``\\S``, a POSIX class;
``\\w``, ``\\W``, ``\\D``, ``\\p{..}``, ``\\P{..}`` (the whole Unicode table)."""
_BASE_US: Final = 30
"""Compiling the smallest pattern."""
_UNICODE_ESCAPES: Final = frozenset("wWDpP")
_SMALL_ESCAPES: Final = frozenset("dsS")
_ANCHOR_ESCAPES: Final = frozenset("bBAz")
_REPEAT: Final = re.compile(r"\{(\d{1,6})(,(\d{0,6}))?\}")


@dataclass(frozen=True, slots=True)
class RegexCost:
    compile_ns: int
    """Compiling the pattern once."""
    scan_ns_per_char: int
    """Matching, per character of the text."""


@dataclass(slots=True)
class _Group:
    folded: bool
    alternatives: int = 0
    sequence: int = 0
    last: int = 0
    """The last atom or group of the sequence (what a repetition repeats)."""
    repeatable: bool = field(default=False)

    def add(self, cost: int) -> None:
        self.sequence += cost
        self.last = cost
        self.repeatable = True

    def total(self) -> int:
        return self.alternatives + self.sequence


def regex_cost(pattern: str) -> RegexCost:
    """An upper estimate of what compiling and running ``pattern`` costs."""
    stack = [_Group(folded=False)]
    position = 0
    while position < len(pattern):
        group = stack[-1]
        char = pattern[position]
        position += 1
        if char == "\\":
            cost, position = _escape(pattern, position, group.folded)
            group.add(cost)
        elif char == "[":
            cost, position = _class(pattern, position, group.folded)
            group.add(cost)
        elif char == "(":
            folded, position = _group_flags(pattern, position, group)
            if folded is not None:
                stack.append(_Group(folded=folded))
        elif char == ")" and len(stack) > 1:
            inner = stack.pop()
            stack[-1].add(inner.total())
        elif char == "|":
            group.alternatives += group.sequence
            group.sequence = group.last = 0
            group.repeatable = False
        elif char in "*+?" and group.repeatable:
            group.sequence += group.last  # a loop: the atom once more, not copies
            group.repeatable = False
            position += pattern.startswith("?", position)
        elif char == "{" and group.repeatable and (count := _REPEAT.match(pattern, position - 1)):
            low, comma, high = count.groups()
            times = int(high) if high else int(low) + (1 if comma else 0)
            group.sequence += group.last * max(times - 1, 0)
            group.repeatable = False
            position = count.end()
            position += pattern.startswith("?", position)
        elif char in "^$":
            group.add(1)
        elif char == ".":
            group.add(_ATOM["wide"])
        else:
            group.add(_ATOM["folded" if group.folded and char.isalpha() else "literal"])
    while len(stack) > 1:  # unbalanced: the library refuses it; estimate what was read
        inner = stack.pop()
        stack[-1].add(inner.total())
    compile_us = _BASE_US + stack[0].total()
    return RegexCost(compile_us * 1000, 10 * (1 + compile_us // 1000))


def _escape(pattern: str, position: int, folded: bool) -> tuple[int, int]:
    """The cost of the escape after a backslash, and where it ends."""
    if position >= len(pattern):
        return _ATOM["literal"], position
    char = pattern[position]
    position += 1
    if char in "pP":
        if pattern.startswith("{", position):
            end = pattern.find("}", position)
            position = len(pattern) if end < 0 else end + 1
        else:
            position += 1
    elif char == "x" and pattern.startswith("{", position):
        end = pattern.find("}", position)
        position = len(pattern) if end < 0 else end + 1
    elif char == "x":
        position += 2
    elif char == "Q":  # \Q...\E: literal text
        end = pattern.find("\\E", position)
        text = pattern[position:] if end < 0 else pattern[position:end]
        position = len(pattern) if end < 0 else end + 2
        return len(text) * _ATOM["folded" if folded else "literal"], position
    if char in _UNICODE_ESCAPES:
        return _ATOM["unicode"], position
    if char in _SMALL_ESCAPES:
        return _ATOM["digit_space"], position
    if char in _ANCHOR_ESCAPES:
        return _ATOM["ascii"], position
    return _ATOM["folded" if folded else "literal"], position


def _class(pattern: str, position: int, folded: bool) -> tuple[int, int]:
    """The cost of a bracketed class starting after ``[``, and where it ends."""
    start = position
    negated = pattern.startswith("^", position)
    position += negated
    position += pattern.startswith("]", position)  # a leading ] is a member
    worst = _ATOM["folded" if folded else "ascii"]
    while position < len(pattern) and pattern[position] != "]":
        if pattern.startswith("[:", position):
            end = pattern.find(":]", position)
            position = len(pattern) if end < 0 else end + 2
            worst = max(worst, _ATOM["digit_space"])
            continue
        if pattern[position] == "\\":
            cost, position = _escape(pattern, position + 1, folded)
            worst = max(worst, cost)
            continue
        if not pattern[position].isascii():
            worst = max(worst, _ATOM["wide"])
        position += 1
    if negated:
        worst = max(worst, _ATOM["wide"])
    if position >= len(pattern):
        return len(pattern) - start, position
    return worst, position + 1


def _group_flags(pattern: str, position: int, group: _Group) -> tuple[bool | None, int]:
    """After ``(``: whether the new group folds case (None: ``(?i)`` changed the current group's
    flags and opened none), and where its contents begin."""
    if not pattern.startswith("?", position):
        return group.folded, position
    end = position + 1
    while end < len(pattern) and pattern[end] not in ":)<":
        end += 1
    flags = pattern[position + 1 : end]
    if flags == "P" or pattern.startswith("<", end):  # a named group
        close = pattern.find(">", end)
        return group.folded, len(pattern) if close < 0 else close + 1
    on, _, off = flags.partition("-")
    folded = "i" in on or (group.folded and "i" not in off)
    if end < len(pattern) and pattern[end] == ")":
        group.folded = folded
        return None, end + 1
    return folded, end + 1
