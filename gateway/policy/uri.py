"""Resource URIs: their one normal form, and ``*`` / ``**`` patterns, specificity and overlap.

MCP resources are named by URIs (2026-07-28 server/resources.mdx); the ``resources:`` section of
a policy keys its rules by URI or URI pattern. Two spellings of one URI must meet the same rule,
and the backend must be asked for the URI the rule was decided on, so every URI a client sends
is brought to one form first (RFC 3986 §6.2.2, syntax-based normalisation) by
:func:`resource_uri`; the gateway decides on that form *and forwards it*, never the client's
spelling:

1. the URI must parse as ``scheme ":" ["//" authority] path ["?" query]`` (RFC 3986 §3) and hold
   only printable ASCII (a client sends non-ASCII percent-encoded); a fragment (``#``) is refused:
   it names a part of a representation, never a resource of its own;
2. the scheme and the authority's host are lower-cased (§6.2.2.1); userinfo and port stay;
3. percent-encodings use upper-case hex, and those of unreserved characters (``A-Z a-z 0-9 - . _
   ~``) are decoded (§6.2.2.2): ``%2e%2e`` is ``..``, ``%7E`` is ``~``; a ``%`` not followed by two
   hex digits makes the URI invalid;
4. dot segments are removed from the path (§5.2.4), never above its root: ``/docs/../secret`` is
   ``/secret``;
5. ``mcp-gw://<backend>/<URI>`` (the gateway's own form with several backends) wraps a backend's
   URI: the wrapped URI is normalised on its own (steps 1-4), so a dot segment never crosses
   its authority or the backend's name.

An invalid URI matches no rule (denied and hidden: not found). A URI that has no single meaning
is **ambiguous** and refused outright (:class:`gateway.errors.AmbiguousResourceUri`): a server
that decodes ``%2F``, reads ``\\`` as ``/``, collapses ``//`` or clamps ``..`` at the root would
read another path than the one decided on, one a narrower rule may protect. Ambiguous are: a
control character (raw, or ``%00``-``%1F``, ``%7F`` anywhere), a backslash (raw anywhere, or
``%5C`` in the authority or path), an encoded ``/`` (``%2F``) in the authority or path, an empty
path segment (``//``; a trailing ``/`` is no such segment), and a ``..`` that would climb above
the path's root. A normal form is never ambiguous, and normalising it again changes nothing.

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

from gateway.errors import AmbiguousResourceUri
from gateway.seams import GATEWAY_SCHEME

__all__ = [
    "MAX_PATTERN_LENGTH",
    "MAX_URI_LENGTH",
    "UriPattern",
    "compile_pattern",
    "has_uri_wildcard",
    "normalize_uri",
    "overlap",
    "resource_uri",
    "template_pattern",
]

MAX_URI_LENGTH: Final = 2048
"""Longest URI matched; longer ones match nothing."""
MAX_PATTERN_LENGTH: Final = 400
"""Longest pattern (a policy key, or a template's pattern): bounds the exact overlap walk."""

_REST: Final = r":(?://(?P<authority>[^/?#]*))?(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?"
_URI: Final = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)" + _REST)
_PATTERN_URI: Final = re.compile(r"(?P<scheme>[A-Za-z*][A-Za-z0-9+.\-*]*)" + _REST)
"""A pattern's scheme may hold ``*`` (a template's ``{x}``, a wrapped ``mcp-gw://b/*://h/``);
a policy key's own scheme may not (:func:`compile_pattern` refuses it first)."""
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PERCENT: Final = re.compile(r"%(?P<hex>[0-9A-Fa-f]{2})")
_STRAY_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ENCODED_CONTROL: Final = re.compile(r"%(?:[01][0-9A-F]|7F)")
_ENCODED_SEPARATOR: Final = re.compile(r"%(?:2F|5C)")
"""On text already through :func:`_percent` (upper-case hex)."""
_STAR: Final = "\x00"
_DOUBLE: Final = "\x01"
"""Internal tokens for ``*`` and ``**`` (never part of a valid URI, which is printable ASCII)."""
_SEGMENT_STOPS: Final = frozenset("/?")


@dataclass(frozen=True, slots=True)
class _Refused:
    reason: str
    """Fixed text, for a policy key's load error."""
    ambiguous: bool
    """True: refused outright (:class:`AmbiguousResourceUri`); False: not a URI (no rule)."""


_INVALID: Final = _Refused(
    "not a valid URI (printable ASCII, percent-encodings as %XX, no fragment)", ambiguous=False
)
_CONTROL: Final = _Refused("ambiguous: a control character (raw or %00-%1F, %7F)", True)
_BACKSLASH: Final = _Refused("ambiguous: a backslash (\\ or %5C) reads as / on some servers", True)
_ENCODED_SLASH: Final = _Refused("ambiguous: an encoded / (%2F) in the authority or path", True)
_EMPTY_SEGMENT: Final = _Refused("ambiguous: an empty path segment (//)", True)
_CLIMB: Final = _Refused("ambiguous: a dot segment (..) above the root of the path", True)


def has_uri_wildcard(text: str) -> bool:
    return "*" in text


def normalize_uri(uri: str) -> str | None:
    """The normal form of ``uri`` (module docstring), or None when it has none (not a URI, or
    ambiguous): such a URI matches no rule."""
    found = _normalize(uri, pattern=False)
    return found if isinstance(found, str) else None


def resource_uri(uri: str) -> str | None:
    """The spelling of a URI a client sent that the gateway decides on and forwards: its normal
    form, or None when it is not a URI (no rule: not found). Raises
    :class:`~gateway.errors.AmbiguousResourceUri` when it has no single meaning."""
    found = _normalize(uri, pattern=False)
    if isinstance(found, str):
        return found
    if found.ambiguous:
        raise AmbiguousResourceUri()
    return None


def _normalize(text: str, *, pattern: bool) -> str | _Refused:
    """``pattern``: a policy key or a template's pattern, where a wrapped ``mcp-gw://`` part may
    be a bare pattern (``mcp-gw://wiki/**``) rather than a URI."""
    if not text or len(text) > MAX_URI_LENGTH:
        return _INVALID
    if any(c < " " or c == "\x7f" for c in text):
        return _CONTROL
    if "\\" in text:
        return _BACKSLASH
    if not all(" " < c < "\x7f" for c in text) or "#" in text or _STRAY_PERCENT.search(text):
        return _INVALID
    match = (_PATTERN_URI if pattern else _URI).fullmatch(text)
    if match is None:
        return _INVALID
    scheme = match.group("scheme").lower()
    authority = match.group("authority")
    head = scheme + ":"
    if authority is not None:
        authority = _percent(authority)
        if _ENCODED_CONTROL.search(authority):
            return _CONTROL
        if _ENCODED_SEPARATOR.search(authority):
            return _BACKSLASH if "%5C" in authority else _ENCODED_SLASH
        head += "//" + _authority(authority)
        if scheme == GATEWAY_SCHEME:
            return _wrapped(head, text[match.end("authority") :], pattern=pattern)
    return _path_and_query(head, match.group("path"), match.group("query"))


def _wrapped(head: str, rest: str, *, pattern: bool) -> str | _Refused:
    """``head`` + ``/`` + the wrapped URI's own normal form (``rest`` starts after the backend)."""
    if not rest.startswith("/") or rest == "/":
        return _INVALID
    inner = rest[1:]
    found = _normalize(inner, pattern=pattern)
    if pattern and found is _INVALID and _PATTERN_URI.fullmatch(inner) is None:
        path, mark, query = inner.partition("?")  # a bare pattern: its path and query
        found = _path_and_query("", path, query if mark else None)
        if isinstance(found, str) and (not found or _PATTERN_URI.fullmatch(found)):
            # Dot segments removed, it is empty or now reads as a URI: normalise that once
            # more, so the form is its own normal form.
            found = _normalize(found, pattern=True) if found else _INVALID
    return found if isinstance(found, _Refused) else head + "/" + found


def _path_and_query(head: str, path: str, query: str | None) -> str | _Refused:
    path = _percent(path)
    if _ENCODED_CONTROL.search(path):
        return _CONTROL
    if _ENCODED_SEPARATOR.search(path):
        return _BACKSLASH if "%5C" in path else _ENCODED_SLASH
    if "" in path.split("/")[1:-1]:
        return _EMPTY_SEGMENT
    normal = _remove_dot_segments(path)
    if normal is None:
        return _CLIMB
    out = head + normal
    if query is not None:
        query = _percent(query)
        if _ENCODED_CONTROL.search(query):
            return _CONTROL
        out += "?" + query
    return out


def _percent(text: str) -> str:
    def fix(found: re.Match[str]) -> str:
        char = chr(int(found.group("hex"), 16))
        return char if char in _UNRESERVED else "%" + found.group("hex").upper()

    return _PERCENT.sub(fix, text)


def _authority(authority: str) -> str:
    userinfo, at, hostport = authority.rpartition("@")
    if hostport.startswith("["):  # IP literal: "[v6]" or "[v6]:port"
        host, _, rest = hostport.partition("]")
        host, port = host + "]", rest
    else:
        host, colon, port = hostport.partition(":")
        port = colon + port
    if port == ":":
        port = ""  # RFC 3986 §6.2.3: an empty port is the same as none
    return userinfo + at + host.lower() + port


def _remove_dot_segments(path: str) -> str | None:
    """RFC 3986 §5.2.4, on segments (the same output as the algorithm's buffer loop); None when
    a ``..`` would climb above the path's root, which the algorithm silently drops (a server
    resolving the path against a base directory may not)."""
    if "." not in path:
        return path
    absolute = path.startswith("/")
    segments = path.split("/")[1:] if absolute else path.split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                out.append("")
        elif segment == "..":
            if not out:
                return None
            out.pop()
            if last:
                out.append("")
        else:
            out.append(segment)
    joined = "/".join(out)
    return "/" + joined if absolute else joined


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
    match = _URI.fullmatch(key) if "#" not in key else None
    if match is None:
        return None, 'not a URI: write scheme:[//authority]path, e.g. "file:///docs/**"'
    if "*" in match.group("scheme") or "*" in (match.group("authority") or ""):
        return None, "the scheme and the authority are matched literally: no * in them"
    normalized = _normalize(key, pattern=True)
    if isinstance(normalized, _Refused):
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
    normalized = _normalize(text, pattern=True)
    return UriPattern(normalized) if isinstance(normalized, str) else None
