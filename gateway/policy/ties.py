"""Ties between patterns: two equally specific patterns of one section that can match the same
name (or URI) leave no rule to govern it, so the loader rejects them, naming a witness."""

from __future__ import annotations

from gateway.policy import uri_patterns
from gateway.policy.glob import Glob, overlap
from gateway.policy.rules import Rule

__all__ = ["pattern_ties"]


def pattern_ties(section: str, globs: list[Rule]) -> list[str]:
    """Every pair of equally specific patterns that can match one name (exact, with a witness)."""
    found = []
    for index, first in enumerate(globs):
        for second in globs[index + 1 :]:
            a, b = first.glob, second.glob
            if a is None or b is None:
                continue
            if a.specificity != b.specificity:
                break  # sorted by specificity: no later pattern has the same one
            if isinstance(a, uri_patterns.UriPattern) and isinstance(b, uri_patterns.UriPattern):
                witness = uri_patterns.overlap(a, b)
                described = a.describe()
            elif isinstance(a, Glob) and isinstance(b, Glob):
                witness = overlap(first.key, second.key)
                literals, singles = a.specificity
                described = f"literal characters: {literals}, '?': {singles}"
            else:
                continue
            if witness is not None:
                found.append(
                    f"{second.where}: {section}.{second.key}: ties with {section}.{first.key} at "
                    f"{first.where}: both match {witness!r} with the same specificity "
                    f"({described}); add an exact rule or make one pattern more specific"
                )
    return found
