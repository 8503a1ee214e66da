"""Description hygiene: what a backend says about its tools reaches the model's context, so
invisible and bidirectional control characters are removed and descriptions are capped.

The rule is Unicode general category ``Cf`` ("format") plus the whole tag block
U+E0000..U+E007F (U+E0000 itself is unassigned, so not ``Cf``). That covers, among others:

- U+00AD soft hyphen; U+200B..U+200F zero-width space/non-joiner/joiner, LRM, RLM;
- U+202A..U+202E bidirectional embeddings and overrides (LRE, RLE, PDF, LRO, RLO);
- U+2060..U+2064 word joiner and invisible operators; U+2066..U+2069 bidirectional isolates;
- U+FEFF zero-width no-break space (BOM); U+061C Arabic letter mark; U+180E;
- U+E0001, U+E0020..U+E007F tag characters (invisible "ASCII smuggling").

Removing U+200D also splits emoji ZWJ sequences into their parts: a small cosmetic loss against
text the model reads but a person reviewing the catalog cannot see.

:func:`clean_text` is pure; :func:`clean_item` applies it to the display members of one
private definition copy (once per catalog snapshot, never per call).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ELLIPSIS",
    "Cleaned",
    "clean_item",
    "clean_text",
    "has_hidden",
    "is_hidden",
]

ELLIPSIS: Final = "\u2026"
"""Ends a capped description, so the model (and a person) can tell it was cut."""


def is_hidden(char: str) -> bool:
    """One character the hygiene removes (see the module docstring for the rule)."""
    return 0xE0000 <= ord(char) <= 0xE007F or unicodedata.category(char) == "Cf"


def has_hidden(text: str) -> bool:
    return not text.isascii() and any(is_hidden(c) for c in text)


@dataclass(frozen=True, slots=True)
class Cleaned:
    text: str
    removed: int
    """Characters removed by the rule."""
    truncated: bool
    """The text, once cleaned, was longer than the cap and was cut."""


def clean_text(text: str, max_chars: int | None = None) -> Cleaned:
    """``text`` without hidden characters, then at most ``max_chars`` characters (code points).

    A capped text keeps its first ``max_chars - 1`` characters and ends with :data:`ELLIPSIS`,
    so its length is exactly ``max_chars``; a text of ``max_chars`` or fewer is kept whole.
    """
    removed = 0
    if not text.isascii():  # the common case costs one scan
        kept = "".join(c for c in text if not is_hidden(c))
        removed = len(text) - len(kept)
        text = kept
    if max_chars is not None and len(text) > max_chars:
        return Cleaned(text[: max_chars - 1] + ELLIPSIS, removed, True)
    return Cleaned(text, removed, False)


def clean_item(
    definition: dict[str, Any], max_chars: int, *, names: tuple[str, ...] = ()
) -> frozenset[str]:
    """Clean the display members of one private definition copy, in place; the change kinds.

    Members (each cleaned and capped at ``max_chars``): ``title``, ``description``,
    ``annotations.title`` (tools), each
    ``arguments[].title`` / ``description`` (prompts), and the keys in ``names`` (display names
    that are not identifiers, e.g. a resource's ``name``: its URI is what identifies it).
    """
    kinds: set[str] = set()

    def fix(holder: dict[str, Any], key: str, cap: int | None) -> None:
        value = holder.get(key)
        if isinstance(value, str):
            cleaned = clean_text(value, cap)
            if cleaned.removed:
                kinds.add("invisible")
            if cleaned.truncated:
                kinds.add("truncated")
            holder[key] = cleaned.text

    for key in names:
        fix(definition, key, max_chars)
    fix(definition, "title", max_chars)
    fix(definition, "description", max_chars)
    annotations = definition.get("annotations")
    if isinstance(annotations, dict):
        fix(annotations, "title", max_chars)
    arguments = definition.get("arguments")
    if isinstance(arguments, list):
        for argument in arguments:
            if isinstance(argument, dict):
                fix(argument, "title", max_chars)
                fix(argument, "description", max_chars)
    return frozenset(kinds)
