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
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        literals = sum(1 for char in self.pattern if char not in WILDCARDS)
        singles = self.pattern.count("?")
        object.__setattr__(self, "specificity", (literals, singles))
        object.__setattr__(self, "_regex", _compile(self.pattern))

    def matches(self, name: str) -> bool:
        return self._regex.fullmatch(name) is not None


def _compile(pattern: str) -> re.Pattern[str]:
    parts = []
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    # DOTALL: a name containing a newline is still one name; "*" must not stop at it.
    return re.compile("".join(parts), re.DOTALL)


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
