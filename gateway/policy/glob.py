"""Tool-name and subject patterns: ``*`` and ``?`` wildcards, specificity, overlap detection.

The pattern language is deliberately smaller than :mod:`fnmatch`: ``*`` matches any run of
characters (also none), ``?`` matches exactly one character, every other character is literal and
matching is case-sensitive. Character classes (``[...]``) are not supported; the loader rejects
``[`` and ``]`` so that an fnmatch habit never silently means something else.

Specificity orders patterns that match the same name: more literal characters first, then more
``?`` (a ``?`` pins the length, a ``*`` does not). Two patterns of equal specificity that can
both match some name are a tie; :func:`overlap` decides that exactly (it builds a witness name),
so the loader rejects every tie before a policy is used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import Final

__all__ = ["WILDCARDS", "Glob", "has_wildcard", "overlap"]

WILDCARDS: Final = frozenset("*?")
"""Characters with a meaning in a pattern; everything else matches itself."""


def has_wildcard(text: str) -> bool:
    return any(char in WILDCARDS for char in text)


@dataclass(frozen=True, slots=True)
class Glob:
    """One compiled pattern. ``specificity`` sorts descending from most to least specific."""

    pattern: str
    specificity: tuple[int, int] = field(init=False)
    """(literal characters, ``?`` count); larger is more specific."""
    _pieces: tuple[_Piece, ...] = field(init=False, repr=False, compare=False)
    """The pattern split at its ``*``: the first piece is anchored at the start, the last at
    the end (one piece: no ``*``, the whole name)."""

    def __post_init__(self) -> None:
        literals = sum(1 for char in self.pattern if char not in WILDCARDS)
        singles = self.pattern.count("?")
        object.__setattr__(self, "specificity", (literals, singles))
        object.__setattr__(self, "_pieces", tuple(map(_Piece, self.pattern.split("*"))))

    def matches(self, name: str) -> bool:
        """Whether ``name`` matches, in at most (name length) x (pattern length) steps.

        No backtracking regex: ``*a*b*c`` over a long name was cubic there, and names (tools,
        subjects, a condition's ``glob`` over an argument) come from callers. Each piece
        between two stars is taken at its leftmost place after the previous one: that leaves
        the most room for the rest, so no other placement needs trying."""
        pieces = self._pieces
        first, last = pieces[0], pieces[-1]
        if len(pieces) == 1:
            return len(name) == first.length and first.at(name, 0)
        end = len(name) - last.length
        if end < first.length or not first.at(name, 0) or not last.at(name, end):
            return False
        position = first.length
        for piece in pieces[1:-1]:
            found = piece.find(name, position, end)
            if found < 0:
                return False
            position = found + piece.length
        return True


class _Piece:
    """The text between two ``*`` of a pattern: literal characters and ``?`` (any one)."""

    __slots__ = ("_regex", "length", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.length = len(text)
        # A "?" needs a regex (no quantifier in it: it matches in `length` steps at most);
        # DOTALL: a name containing a newline is still one name, "?" matches it too.
        self._regex = (
            re.compile("".join("." if c == "?" else re.escape(c) for c in text), re.DOTALL)
            if "?" in text
            else None
        )

    def at(self, name: str, position: int) -> bool:
        """Whether the piece matches ``name`` at ``position``."""
        if self._regex is None:
            return name.startswith(self.text, position)
        return self._regex.match(name, position) is not None

    def find(self, name: str, start: int, end: int) -> int:
        """The leftmost place in ``name[start:end]`` where the piece matches, or -1."""
        if self._regex is None:
            return name.find(self.text, start, end)
        found = self._regex.search(name, start, end)
        return -1 if found is None else found.start()


def overlap(first: str, second: str) -> str | None:
    """A name both patterns match, or None when no such name exists.

    Exact for this pattern language: a depth-first walk over pairs of positions, where a ``*``
    on either side may stay (absorbing one more symbol of the other side) or be skipped. Each of
    the ``(len(first) + 1) * (len(second) + 1)`` states is visited at most once.
    """

    @cache
    def walk(i: int, j: int) -> str | None:
        end_i, end_j = i == len(first), j == len(second)
        if end_i and end_j:
            return ""
        a = None if end_i else first[i]
        b = None if end_j else second[j]
        if a == "*":
            found = walk(i + 1, j)  # the star matches nothing more
            if found is not None:
                return found
            if b is not None:
                # The star absorbs what ``b`` stands for: one character for a literal or "?",
                # any text for another star (which then moves on).
                rest = walk(i, j + 1)
                if rest is not None:
                    return ("" if b == "*" else _symbol(b)) + rest
            return None
        if b == "*":
            found = walk(i, j + 1)
            if found is not None:
                return found
            if a is not None:
                rest = walk(i + 1, j)
                if rest is not None:
                    return _symbol(a) + rest
            return None
        if a is None or b is None:
            return None
        if "?" in (a, b) or a == b:
            rest = walk(i + 1, j + 1)
            if rest is not None:
                # A literal wins over "?"; two "?" produce any character.
                return _symbol(b if a == "?" else a) + rest
        return None

    return walk(0, 0)


def _symbol(char: str) -> str:
    """The character a single pattern position contributes to a witness name."""
    return "x" if char in WILDCARDS else char
