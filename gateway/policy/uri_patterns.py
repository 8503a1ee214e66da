"""Resource URI patterns: ``*`` / ``**`` over normal forms (:mod:`gateway.policy.uri`), their
specificity and overlap.

Patterns: ``*`` matches any run of characters within one path segment (no ``/``, no ``?``, no
``%2F``);
``**`` matches any run of characters, across segments and into the query. Every other
character is literal and case-sensitive (after normalisation; a key that is ambiguous is a load
error). In a policy key the scheme and the authority are literal: wildcards may appear only
after them. Specificity orders patterns that match the same URI: more literal characters first,
then fewer ``**``. :func:`overlap` decides exactly whether two patterns can match one URI and
builds that URI as a witness.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Final

from gateway.policy.uri import URI_SYNTAX, Refused, normal_form

__all__ = [
    "MAX_PATTERN_LENGTH",
    "UriPattern",
    "compile_pattern",
    "overlap",
    "template_pattern",
]

MAX_PATTERN_LENGTH: Final = 400
"""Longest pattern (a policy key, or a template's pattern): bounds the exact overlap walk."""
_STAR: Final = "\x00"
_DOUBLE: Final = "\x01"
"""Internal tokens for ``*`` and ``**`` (never part of a valid URI, which is printable ASCII)."""
_SEGMENT_STOPS: Final = frozenset("/?")


@dataclass(frozen=True, slots=True)
class UriPattern:
    """One compiled resource pattern (already normalised). ``specificity`` sorts descending."""

    pattern: str
    """The normalised pattern text, ``*`` and ``**`` as written."""
    specificity: tuple[int, int] = field(init=False)
    """(literal characters, minus the number of ``**``); larger is more specific."""
    _tokens: str = field(init=False, repr=False, compare=False)
    _prefix: str = field(init=False, repr=False, compare=False)
    _full: Callable[[str], object] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tokens = _tokenize(self.pattern)
        literals = sum(1 for c in tokens if c not in (_STAR, _DOUBLE))
        wildcards = len(tokens) - literals
        object.__setattr__(self, "specificity", (literals, -tokens.count(_DOUBLE)))
        object.__setattr__(self, "_tokens", tokens)
        object.__setattr__(self, "_prefix", re.split(f"[{_STAR}{_DOUBLE}]", tokens, maxsplit=1)[0])
        # One wildcard cannot make a regex backtrack more than linearly; two or more can
        # (``file:///**a**a**a**b`` over a 400-character URI took 0.8 s, and URIs come from
        # callers), so those run on the automaton, linear in the URI's length.
        full = _compile(tokens).fullmatch if wildcards <= 1 else _Automaton(tokens).matches
        object.__setattr__(self, "_full", full)

    def matches(self, normalized_uri: str) -> bool:
        """Whether the pattern matches a URI already brought to normal form, in time linear
        in the URI's length whatever the pattern."""
        return normalized_uri.startswith(self._prefix) and bool(self._full(normalized_uri))

    def describe(self) -> str:
        literals, doubles = self.specificity
        return f"literal characters: {literals}, '**': {-doubles}"


def compile_pattern(key: str) -> tuple[UriPattern | None, str | None]:
    """(pattern, None) for a valid policy key, else (None, a fixed reason)."""
    if len(key) > MAX_PATTERN_LENGTH:
        return None, f"longer than {MAX_PATTERN_LENGTH} characters"
    if "***" in key:
        return None, "use * (one segment) or ** (any depth), not ***"
    match = URI_SYNTAX.fullmatch(key) if "#" not in key else None
    if match is None:
        return None, 'not a URI: write scheme:[//authority]path, e.g. "file:///docs/**"'
    if "*" in match.group("scheme") or "*" in (match.group("authority") or ""):
        return None, "the scheme and the authority are matched literally: no * in them"
    normalized = normal_form(key, pattern=True)
    if isinstance(normalized, Refused):
        return None, normalized.reason
    return UriPattern(normalized), None


def _tokenize(pattern: str) -> str:
    return pattern.replace("**", _DOUBLE).replace("*", _STAR)


def _compile(tokens: str) -> re.Pattern[str]:
    parts = []
    for char in tokens:
        if char == _STAR:
            parts.append(r"(?:(?!%2F)[^/?])*")
        elif char == _DOUBLE:
            parts.append(".*")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


class _Automaton:
    """The pattern as a nondeterministic automaton run on bit sets (shift-and): bit ``k`` set
    means the first ``k`` tokens have matched. One step per URI character, each a few integer
    operations whatever the number of live states: no backtracking."""

    __slots__ = ("_accept", "_literals", "_stars", "_wild")

    def __init__(self, tokens: str) -> None:
        literals: dict[str, int] = {}
        stars = doubles = 0
        for k, char in enumerate(tokens):
            if char == _STAR:
                stars |= 1 << k
            elif char == _DOUBLE:
                doubles |= 1 << k
            else:
                literals[char] = literals.get(char, 0) | 1 << k
        self._literals = literals
        self._stars = stars
        self._wild = stars | doubles
        self._accept = 1 << len(tokens)

    def _closure(self, states: int) -> int:
        """``states`` plus what a wildcard matching nothing reaches."""
        while True:
            more = states | (states & self._wild) << 1
            if more == states:
                return states
            states = more

    def matches(self, text: str) -> bool:
        doubles = self._wild & ~self._stars
        states = self._closure(1)
        for position, char in enumerate(text):
            step = (states & self._literals.get(char, 0)) << 1 | states & doubles
            if _accepts(_STAR, text, position):
                step |= states & self._stars
            states = self._closure(step)
            if not states:
                return False
        return bool(states & self._accept)


def _accepts(wildcard: str, text: str, position: int) -> bool:
    """Whether ``wildcard`` may absorb the literal at ``text[position]``."""
    if wildcard == _DOUBLE:
        return True
    if text[position] in _SEGMENT_STOPS:
        return False
    # An encoded "/" is not part of a single segment's wildcard either.
    return not (text[position] == "%" and text[position + 1 : position + 3] == "2F")


def overlap(first: UriPattern, second: UriPattern) -> str | None:
    """A normalised URI both patterns match, or None when there is none.

    Exact: a walk over pairs of positions where a wildcard on either side may stop or absorb one
    literal of the other side that its class allows (when both sides are wildcards, letting one
    match nothing loses no solution). Each state is visited at most once.
    """
    a_tokens, b_tokens = first._tokens, second._tokens

    @cache
    def walk(i: int, j: int) -> str | None:
        end_i, end_j = i == len(a_tokens), j == len(b_tokens)
        if end_i and end_j:
            return ""
        a = None if end_i else a_tokens[i]
        b = None if end_j else b_tokens[j]
        for wild, other, side in ((a, b, 0), (b, a, 1)):
            if wild not in (_STAR, _DOUBLE):
                continue
            found = walk(i + 1, j) if side == 0 else walk(i, j + 1)
            if found is not None:
                return found
            if other is None:
                return None
            if other in (_STAR, _DOUBLE):
                return walk(i, j + 1) if side == 0 else walk(i + 1, j)
            text, pos = (b_tokens, j) if side == 0 else (a_tokens, i)
            if not _accepts(wild, text, pos):
                return None
            rest = walk(i, j + 1) if side == 0 else walk(i + 1, j)
            return None if rest is None else other + rest
        if a is None or b is None or a != b:
            return None
        rest = walk(i + 1, j + 1)
        return None if rest is None else a + rest

    return walk(0, 0)


_EXPRESSION: Final = re.compile(r"\{([+#./;?&]?)([^{}]*)\}")


def template_pattern(template: str) -> UriPattern | None:
    """A pattern matching every URI an RFC 6570 template can expand to (a superset), or None.

    Simple (``{x}``), label (``{.x}``) and path-parameter (``{;x}``) expressions stay inside a
    segment (their expansion percent-encodes ``/`` and ``?``) and become ``*``; reserved
    (``{+x}``), fragment, path-segment (``{/x}``) and query (``{?x}``, ``{&x}``) expressions
    become ``**``. Used to list templates (docs/policy.md#resource-templates); every read is
    still decided on its concrete URI.
    """
    if len(template) > MAX_PATTERN_LENGTH:
        return None
    pieces: list[str] = []
    position = 0
    for found in _EXPRESSION.finditer(template):
        literal = template[position : found.start()]
        if "*" in literal:
            return None  # a literal "*" would read as a wildcard
        pieces.append(literal)
        pieces.append("*" if found.group(1) in ("", ".", ";") else "**")
        position = found.end()
    if "*" in template[position:]:
        return None
    pieces.append(template[position:])
    text = "".join(pieces)
    if "{" in text or "}" in text:
        return None
    normalized = normal_form(text, pattern=True)
    return UriPattern(normalized) if isinstance(normalized, str) else None
