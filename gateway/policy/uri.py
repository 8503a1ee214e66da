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

Patterns over normal forms: :mod:`gateway.policy.uri_patterns`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from gateway.errors import AmbiguousResourceUri
from gateway.seams import GATEWAY_SCHEME

__all__ = [
    "MAX_URI_LENGTH",
    "URI_SYNTAX",
    "Refused",
    "has_uri_wildcard",
    "normal_form",
    "normalize_uri",
    "resource_uri",
]

MAX_URI_LENGTH: Final = 2048
"""Longest URI matched; longer ones match nothing."""

_REST: Final = r":(?://(?P<authority>[^/?#]*))?(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?"
URI_SYNTAX: Final = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)" + _REST)
_PATTERN_URI: Final = re.compile(r"(?P<scheme>[A-Za-z*][A-Za-z0-9+.\-*]*)" + _REST)
"""A pattern's scheme may hold ``*`` (a template's ``{x}``, a wrapped ``mcp-gw://b/*://h/``);
a policy key's own scheme may not (:func:`compile_pattern` refuses it first)."""
_UNRESERVED: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PERCENT: Final = re.compile(r"%(?P<hex>[0-9A-Fa-f]{2})")
_STRAY_PERCENT: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")
_ENCODED_CONTROL: Final = re.compile(r"%(?:[01][0-9A-F]|7F)")
_ENCODED_SEPARATOR: Final = re.compile(r"%(?:2F|5C)")
"""On text already through :func:`_percent` (upper-case hex)."""


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str
    """Fixed text, for a policy key's load error."""
    ambiguous: bool
    """True: refused outright (:class:`AmbiguousResourceUri`); False: not a URI (no rule)."""


_INVALID: Final = Refused(
    "not a valid URI (printable ASCII, percent-encodings as %XX, no fragment)", ambiguous=False
)
_CONTROL: Final = Refused("ambiguous: a control character (raw or %00-%1F, %7F)", True)
_BACKSLASH: Final = Refused("ambiguous: a backslash (\\ or %5C) reads as / on some servers", True)
_ENCODED_SLASH: Final = Refused("ambiguous: an encoded / (%2F) in the authority or path", True)
_EMPTY_SEGMENT: Final = Refused("ambiguous: an empty path segment (//)", True)
_CLIMB: Final = Refused("ambiguous: a dot segment (..) above the root of the path", True)


def has_uri_wildcard(text: str) -> bool:
    return "*" in text


def normalize_uri(uri: str) -> str | None:
    """The normal form of ``uri`` (module docstring), or None when it has none (not a URI, or
    ambiguous): such a URI matches no rule."""
    found = normal_form(uri, pattern=False)
    return found if isinstance(found, str) else None


def resource_uri(uri: str) -> str | None:
    """The spelling of a URI a client sent that the gateway decides on and forwards: its normal
    form, or None when it is not a URI (no rule: not found). Raises
    :class:`~gateway.errors.AmbiguousResourceUri` when it has no single meaning."""
    found = normal_form(uri, pattern=False)
    if isinstance(found, str):
        return found
    if found.ambiguous:
        raise AmbiguousResourceUri()
    return None


def normal_form(text: str, *, pattern: bool) -> str | Refused:
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
    match = (_PATTERN_URI if pattern else URI_SYNTAX).fullmatch(text)
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


def _wrapped(head: str, rest: str, *, pattern: bool) -> str | Refused:
    """``head`` + ``/`` + the wrapped URI's own normal form (``rest`` starts after the backend)."""
    if not rest.startswith("/") or rest == "/":
        return _INVALID
    inner = rest[1:]
    found = normal_form(inner, pattern=pattern)
    if pattern and found is _INVALID and _PATTERN_URI.fullmatch(inner) is None:
        path, mark, query = inner.partition("?")  # a bare pattern: its path and query
        found = _path_and_query("", path, query if mark else None)
        if isinstance(found, str) and (not found or _PATTERN_URI.fullmatch(found)):
            # Dot segments removed, it is empty or now reads as a URI: normalise that once
            # more, so the form is its own normal form.
            found = normal_form(found, pattern=True) if found else _INVALID
    return found if isinstance(found, Refused) else head + "/" + found


def _path_and_query(head: str, path: str, query: str | None) -> str | Refused:
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
